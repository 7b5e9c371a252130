import { type V1Lease, V1MicroTime } from '@kubernetes/client-node';
import type { ScheduledTask, Scheduler } from '../infra/scheduler.ts';
import { type KubeClient, statusOf } from './kube.ts';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  /** How long others wait after the last renewal they observed before taking over (client-go: 15 s). */
  leaseDurationMs: number;
  /** A leader that has not renewed for this long stops acting, before anyone else may take over (10 s). */
  renewDeadlineMs: number;
  /** How often to try to acquire or renew (2 s). */
  retryPeriodMs: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  log: (message: string) => void;
}

/**
 * Leader election on a coordination.k8s.io Lease, as client-go does it. Writes go through optimistic
 * concurrency (the Lease's resourceVersion), so two candidates cannot both win one round; a leader stops
 * acting once it has gone `renewDeadlineMs` without a renewal, which is shorter than the `leaseDurationMs`
 * the others wait, so two replicas never act at once. Expiry is judged on the local clock from when the
 * record was last seen to change, never by comparing another machine's timestamps.
 */
export class LeaderElector {
  readonly #kube: KubeClient;
  readonly #scheduler: Scheduler;
  readonly #options: LeaderOptions;
  #leading = false;
  #lastRenewMs = Number.NEGATIVE_INFINITY;
  #observed: { key: string; atMs: number } | undefined;
  #task: ScheduledTask | undefined;
  #stopped = true;

  constructor(kube: KubeClient, scheduler: Scheduler, options: LeaderOptions) {
    this.#kube = kube;
    this.#scheduler = scheduler;
    this.#options = options;
  }

  /** True only while this replica holds the lease and renewed it within the renew deadline. */
  isLeader(): boolean {
    return this.#leading && this.#scheduler.nowMs() - this.#lastRenewMs < this.#options.renewDeadlineMs;
  }

  start(): void {
    this.#stopped = false;
    this.#task = this.#scheduler.schedule(0, () => this.#round());
  }

  /** Stops campaigning; with `release`, a leader hands the lease back so that another takes over at once. */
  async stop(release: boolean): Promise<void> {
    this.#stopped = true;
    this.#task?.cancel();
    const wasLeading = this.#leading;
    this.#setLeading(false);
    if (release && wasLeading) {
      try {
        const lease = await this.#kube.getLease(this.#options.namespace, this.#options.name);
        if (lease?.spec?.holderIdentity === this.#options.identity) {
          await this.#kube.replaceLease({ ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 } });
        }
      } catch (error) {
        this.#options.log(`could not release the lease: ${(error as Error).message}`);
      }
    }
  }

  async #round(): Promise<void> {
    if (this.#stopped) return;
    try {
      const renewed = await this.#tryAcquireOrRenew();
      if (this.#stopped) return;
      if (renewed) {
        this.#lastRenewMs = this.#scheduler.nowMs();
        this.#setLeading(true);
      } else this.#setLeading(false);
    } catch (error) {
      this.#options.log(`lease ${this.#options.namespace}/${this.#options.name}: ${(error as Error).message}`);
      if (this.#leading && !this.isLeader()) this.#setLeading(false);
    }
    if (!this.#stopped) this.#task = this.#scheduler.schedule(this.#options.retryPeriodMs, () => this.#round());
  }

  #setLeading(leading: boolean): void {
    if (leading === this.#leading) return;
    this.#leading = leading;
    if (leading) this.#options.onStartedLeading();
    else this.#options.onStoppedLeading();
  }

  /** One attempt; true when this replica holds the lease afterwards. Throws on API errors other than a lost race. */
  async #tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.#options;
    const now = this.#scheduler.nowMs();
    const durationS = Math.ceil(this.#options.leaseDurationMs / 1000);
    const existing = await this.#kube.getLease(namespace, name);
    if (!existing) {
      try {
        await this.#kube.createLease({
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: durationS,
            acquireTime: new V1MicroTime(now),
            renewTime: new V1MicroTime(now),
            leaseTransitions: 0,
          },
        });
        return true;
      } catch (error) {
        if (statusOf(error) === 409) return false;
        throw error;
      }
    }
    const spec = existing.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const key = `${holder}|${String(spec.renewTime)}|${existing.metadata?.resourceVersion}`;
    if (this.#observed?.key !== key) this.#observed = { key, atMs: now };
    const expired = now - this.#observed.atMs >= (spec.leaseDurationSeconds ?? durationS) * 1000;
    if (holder !== identity && holder !== '' && !expired) return false;
    const next: V1Lease = {
      ...existing,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: durationS,
        renewTime: new V1MicroTime(now),
        ...(holder === identity ? {} : { acquireTime: new V1MicroTime(now), leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
      },
    };
    try {
      const written = await this.#kube.replaceLease(next);
      this.#observed = { key: `${identity}|${String(written.spec?.renewTime)}|${written.metadata?.resourceVersion}`, atMs: now };
      return true;
    } catch (error) {
      if (statusOf(error) === 409) return false;
      throw error;
    }
  }
}
