import { CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ApiError } from '../infra/errors/catalogue.ts';
import type { OperatorActor } from '../infra/http/operator-auth.ts';
import type { Scheduler } from '../infra/scheduler.ts';
import { ListWatch } from '../platform-endpoints/list-watch.ts';
import { fromResource, type ManagedPartner } from './partner-resource.ts';
import type { PartnerService } from './service.ts';

const GROUP = 'kube-dc.com';
const VERSION = 'v1';
const PLURAL = 'partners';
const WATCH_TIMEOUT_S = 300;

interface PartnerObject {
  metadata: { name?: string; namespace?: string; generation?: number; resourceVersion?: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** What the watcher asks of the capacity module: a partner's plans, GPU profiles and capacity, read and set. */
interface PartnerCapacitySettings {
  partnerCapacity(partnerId: string): Promise<{
    plans: string[];
    gpu_profiles: string[];
    pool: Record<string, unknown>;
    per_customer_max: Record<string, unknown>;
  }>;
  setPartnerPlans(partnerId: string, plans: string[], who: OperatorActor): Promise<unknown>;
  setGpuProfiles(partnerId: string, profiles: string[], who: OperatorActor): Promise<unknown>;
  setCapacity(partnerId: string, capacity: ManagedPartner['capacity'], who: OperatorActor): Promise<unknown>;
}

export interface PartnerWatcherDeps {
  kubeConfig: KubeConfig;
  /** Only this namespace's Partners; undefined: every namespace. */
  namespace: string | undefined;
  partners: PartnerService;
  capacity: PartnerCapacitySettings;
  scheduler: Scheduler;
  logger: Logger;
  /** A full re-list this often (drift repair, and the customer count in status). */
  resyncMs?: number;
}

/**
 * `--watch-partners`: Kube-DC `Partner` resources as the source of partners' settings. Lists and watches
 * them (resuming after a dropped watch, re-listing after a 410), applies each spec through the partner and
 * capacity services (audited as `kubernetes:<namespace>/<name>`), and writes `status` back: ready, the
 * live customer count, observedGeneration and a Ready condition saying what was refused, if anything.
 * Keys stay in Tenantry. A deleted resource leaves its partner in place, no longer managed.
 */
export class PartnerWatcher {
  readonly #d: PartnerWatcherDeps;
  readonly #custom: CustomObjectsApi;
  readonly #listWatch: ListWatch<PartnerObject>;
  /** The resources seen at the last list and since, by source: a list without one means it was deleted. */
  readonly #known = new Set<string>();
  /** Changes are applied one at a time, in the order they arrive. */
  #chain: Promise<void> = Promise.resolve();
  /** Applies done (for tests and logs). */
  applied = 0;

  constructor(deps: PartnerWatcherDeps) {
    this.#d = deps;
    this.#custom = deps.kubeConfig.makeApiClient(CustomObjectsApi);
    const path = deps.namespace
      ? `/apis/${GROUP}/${VERSION}/namespaces/${deps.namespace}/${PLURAL}`
      : `/apis/${GROUP}/${VERSION}/${PLURAL}`;
    this.#listWatch = new ListWatch<PartnerObject>({
      what: 'partners.kube-dc.com',
      list: async () => {
        const list = (
          deps.namespace
            ? await this.#custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: deps.namespace, plural: PLURAL })
            : await this.#custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })
        ) as { items: PartnerObject[]; metadata?: { resourceVersion?: string } };
        return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? '' };
      },
      watch: (resourceVersion, onEvent, done) => {
        const watch = new Watch(deps.kubeConfig);
        (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = (WATCH_TIMEOUT_S + 30) * 1000;
        return watch.watch(path, { resourceVersion, allowWatchBookmarks: true, timeoutSeconds: WATCH_TIMEOUT_S }, onEvent, done);
      },
      onSync: (items) => this.#enqueue(() => this.#sync(items)),
      onEvent: (type, object) => this.#enqueue(() => (type === 'DELETED' ? this.#release(sourceOf(object)) : this.#apply(object))),
      scheduler: deps.scheduler,
      resyncMs: deps.resyncMs ?? 60_000,
      log: (message) => deps.logger.warn(message),
    });
  }

  start(): void {
    this.#listWatch.start();
  }

  async stop(): Promise<void> {
    this.#listWatch.stop();
    await this.#chain;
  }

  /** Resolves once everything queued so far is applied. */
  idle(): Promise<void> {
    return this.#chain;
  }

  #enqueue(work: () => Promise<void>): void {
    this.#chain = this.#chain
      .then(work)
      .catch((error: unknown) => this.#d.logger.error({ err: error }, 'partners.kube-dc.com: applying failed'));
  }

  async #sync(items: PartnerObject[]): Promise<void> {
    const present = new Set(items.map(sourceOf));
    for (const item of items) await this.#apply(item);
    for (const source of [...this.#known]) if (!present.has(source)) await this.#release(source);
  }

  async #release(source: string): Promise<void> {
    this.#known.delete(source);
    await this.#d.partners.releaseManaged(source, actor(source));
    this.#d.logger.info({ source }, 'partners.kube-dc.com: resource deleted; the partner stays, no longer managed');
  }

  async #apply(object: PartnerObject): Promise<void> {
    const source = sourceOf(object);
    this.#known.add(source);
    const { partner, problems } = fromResource(object);
    if (!partner) return this.#status(object, { ready: false, reason: 'InvalidSpec', message: problems.join('; ') });
    try {
      const applied = await this.#d.partners.applyManaged(partner, actor(source));
      await this.#applyCapacity(partner);
      this.applied += 1;
      await this.#status(object, {
        ready: true,
        reason: 'Applied',
        message:
          partner.ignored.length === 0
            ? `partner ${partner.id} matches the spec`
            : `partner ${partner.id} matches the spec; Tenantry does not enforce ${partner.ignored.join(', ')}`,
        customerCount: applied.customer_count,
      });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      await this.#status(object, { ready: false, reason: 'Refused', message: `${error.code}: ${error.message}` });
    }
  }

  /** Plans, GPU profiles and capacity: only what the spec names and only when it differs. */
  async #applyCapacity(partner: ManagedPartner): Promise<void> {
    const { capacity } = this.#d;
    const who = actor(partner.source);
    const current = await capacity.partnerCapacity(partner.id);
    const same = (a: string[], b: string[]) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());
    if (partner.plans !== undefined && !same(partner.plans, current.plans)) await capacity.setPartnerPlans(partner.id, partner.plans, who);
    if (partner.gpu_profiles !== undefined && !same(partner.gpu_profiles, current.gpu_profiles))
      await capacity.setGpuProfiles(partner.id, partner.gpu_profiles, who);
    const differs = (want: Record<string, unknown> | undefined, have: Record<string, unknown>) =>
      want !== undefined &&
      Object.entries(want).some(
        ([k, v]) => JSON.stringify(v) !== JSON.stringify(k === 'gpus' ? { ...(have.gpus as object), ...(v as object) } : have[k]),
      );
    if (differs(partner.capacity.pool, current.pool) || differs(partner.capacity.per_customer_max, current.per_customer_max))
      await capacity.setCapacity(partner.id, partner.capacity, who);
  }

  /** Writes status when it says something new (a write of the same status would only wake the watch again). */
  async #status(object: PartnerObject, state: { ready: boolean; reason: string; message: string; customerCount?: number }): Promise<void> {
    const before = (object.status ?? {}) as {
      conditions?: Array<Record<string, unknown>>;
      ready?: boolean;
      customerCount?: number;
      observedGeneration?: number;
    };
    const previous = before.conditions?.find((c) => c.type === 'Ready');
    const status = state.ready ? 'True' : 'False';
    const generation = object.metadata.generation ?? 0;
    const unchanged =
      before.ready === state.ready &&
      before.observedGeneration === generation &&
      (state.customerCount === undefined || before.customerCount === state.customerCount) &&
      previous?.status === status &&
      previous?.reason === state.reason &&
      previous?.message === state.message;
    if (unchanged) return;
    const at =
      previous?.status === status && previous?.reason === state.reason
        ? previous.lastTransitionTime
        : new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const body = {
      status: {
        ready: state.ready,
        observedGeneration: generation,
        ...(state.customerCount !== undefined ? { customerCount: state.customerCount } : {}),
        conditions: [
          {
            type: 'Ready',
            status,
            reason: state.reason,
            message: state.message.slice(0, 1000),
            observedGeneration: generation,
            lastTransitionTime: at,
          },
        ],
      },
    };
    try {
      await this.#custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace: object.metadata.namespace ?? '',
          plural: PLURAL,
          name: object.metadata.name ?? '',
          body,
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    } catch (error) {
      // The status is advisory; the next event or resync writes it again.
      this.#d.logger.warn({ err: error, source: sourceOf(object) }, 'partners.kube-dc.com: writing status failed');
    }
  }
}

function sourceOf(object: PartnerObject): string {
  return `${object.metadata.namespace ?? ''}/${object.metadata.name ?? ''}`;
}

function actor(source: string): OperatorActor {
  return { actor: `kubernetes:${source}`, requestId: 'watch-partners' };
}
