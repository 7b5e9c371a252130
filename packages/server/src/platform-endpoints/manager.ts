import type { KubeConfig, V1Node, V1Service } from '@kubernetes/client-node';
import { type Scheduler, systemScheduler } from '../infra/scheduler.ts';
import { type EndpointSettings, isManaged } from './annotations.ts';
import { EndpointController, serviceKey } from './endpoint.ts';
import { KubeClient } from './kube.ts';
import { LeaderElector } from './leader.ts';
import { ListWatch } from './list-watch.ts';
import { EndpointMetrics } from './metrics.ts';
import { type Probe, probeNode } from './probe.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from './slice.ts';

export interface EndpointManagerOptions {
  kubeConfig: KubeConfig;
  /** Namespaces whose Services are watched; empty: all namespaces (needs cluster-wide RBAC). */
  namespaces: string[];
  leaseNamespace: string;
  leaseName: string;
  /** This replica's name in the Lease (the pod name in a cluster). */
  identity: string;
  scheduler?: Scheduler;
  probe?: Probe;
  /** Full re-list period (default 5 minutes). */
  resyncMs?: number;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Server-side watch timeout (default 5 minutes). */
  watchTimeoutSeconds?: number;
  log?: (message: string) => void;
}

/**
 * The endpoint manager: watches annotated Services and the nodes, and on the leader runs one
 * EndpointController per platform endpoint. Followers keep their caches warm so that a failover only waits
 * for the lease.
 */
export class EndpointManager {
  readonly metrics = new EndpointMetrics();
  readonly #kube: KubeClient;
  readonly #scheduler: Scheduler;
  readonly #options: EndpointManagerOptions;
  readonly #services = new Map<string, V1Service>();
  readonly #nodes = new Map<string, V1Node>();
  readonly #controllers = new Map<string, EndpointController>();
  readonly #watches: Array<ListWatch<V1Service> | ListWatch<V1Node>> = [];
  readonly #elector: LeaderElector;
  readonly #probe: Probe;
  readonly #log: (message: string) => void;

  constructor(options: EndpointManagerOptions) {
    this.#options = options;
    this.#kube = new KubeClient(options.kubeConfig);
    this.#scheduler = options.scheduler ?? systemScheduler;
    this.#probe = options.probe ?? probeNode;
    this.#log = options.log ?? ((message) => process.stderr.write(`endpoint-manager: ${message}\n`));
    this.#elector = new LeaderElector(this.#kube, this.#scheduler, {
      namespace: options.leaseNamespace,
      name: options.leaseName,
      identity: options.identity,
      leaseDurationMs: options.leaseDurationMs ?? 15_000,
      renewDeadlineMs: options.renewDeadlineMs ?? 10_000,
      retryPeriodMs: options.retryPeriodMs ?? 2_000,
      onStartedLeading: () => this.#startedLeading(),
      onStoppedLeading: () => this.#stoppedLeading(),
      log: this.#log,
    });
  }

  isLeader(): boolean {
    return this.#elector.isLeader();
  }

  /** Every watch has listed at least once. */
  get ready(): boolean {
    return this.#watches.length > 0 && this.#watches.every((w) => w.synced);
  }

  /** The Services managed right now (namespace/name). */
  get endpoints(): string[] {
    return [...this.#controllers.keys()];
  }

  /** The settings a managed Service's annotations give right now (undefined: not managed, or invalid). */
  settingsOf(key: string): EndpointSettings | undefined {
    return this.#controllers.get(key)?.settings;
  }

  start(): void {
    const resyncMs = this.#options.resyncMs ?? 300_000;
    const timeout = this.#options.watchTimeoutSeconds ?? 300;
    const namespaces = this.#options.namespaces.length > 0 ? this.#options.namespaces : [undefined];
    for (const namespace of namespaces) {
      const path = namespace ? `/api/v1/namespaces/${namespace}/services` : '/api/v1/services';
      const watch: ListWatch<V1Service> = new ListWatch<V1Service>({
        what: `services${namespace ? ` in ${namespace}` : ''}`,
        list: () => this.#kube.listServices(namespace),
        watch: (rv, onEvent, done) => this.#kube.watch(path, rv, timeout, onEvent, done),
        onSync: (items) => {
          for (const [key, service] of this.#services)
            if (namespace === undefined || service.metadata?.namespace === namespace) this.#services.delete(key);
          for (const service of items) this.#services.set(serviceKey(service), service);
          this.#reconcile(true);
        },
        onEvent: (type, service) => {
          if (type === 'DELETED') this.#services.delete(serviceKey(service));
          else this.#services.set(serviceKey(service), service);
          this.#reconcile(false);
        },
        scheduler: this.#scheduler,
        resyncMs,
        log: this.#log,
        onError: () => this.metrics.apiErrors.inc({ operation: 'watch-services' }),
      });
      this.#watches.push(watch);
    }
    this.#watches.push(
      new ListWatch<V1Node>({
        what: 'nodes',
        list: () => this.#kube.listNodes(),
        watch: (rv, onEvent, done) => this.#kube.watch('/api/v1/nodes', rv, timeout, onEvent, done),
        onSync: (items) => {
          this.#nodes.clear();
          for (const node of items) this.#nodes.set(node.metadata?.name ?? '', node);
        },
        onEvent: (type, node) => {
          if (type === 'DELETED') this.#nodes.delete(node.metadata?.name ?? '');
          else this.#nodes.set(node.metadata?.name ?? '', node);
        },
        scheduler: this.#scheduler,
        resyncMs,
        log: this.#log,
        onError: () => this.metrics.apiErrors.inc({ operation: 'watch-nodes' }),
      }),
    );
    for (const watch of this.#watches) watch.start();
    this.#elector.start();
  }

  /** Stops watching and probing; with `release` (a graceful shutdown) the lease is handed back at once. */
  async stop(release = true): Promise<void> {
    for (const watch of this.#watches) watch.stop();
    for (const controller of this.#controllers.values()) controller.stop();
    await this.#elector.stop(release);
  }

  #startedLeading(): void {
    this.metrics.leader.set(1);
    this.#log(`${this.#options.identity} is the leader`);
    for (const controller of this.#controllers.values()) controller.start();
    void this.#removeOrphans();
  }

  #stoppedLeading(): void {
    this.metrics.leader.set(0);
    this.#log(`${this.#options.identity} is not the leader`);
    for (const controller of this.#controllers.values()) controller.stop();
  }

  /** Brings the controllers in line with the annotated Services in the cache. */
  #reconcile(fullList: boolean): void {
    const leading = this.isLeader();
    for (const [key, service] of this.#services) {
      if (!isManaged(service.metadata?.annotations)) continue;
      const existing = this.#controllers.get(key);
      if (existing) existing.update(service);
      else {
        const controller = new EndpointController(service, {
          kube: this.#kube,
          scheduler: this.#scheduler,
          metrics: this.metrics,
          probe: this.#probe,
          isLeader: () => this.isLeader(),
          nodes: () => this.#nodes.values(),
          log: this.#log,
          identity: this.#options.identity,
        });
        this.#controllers.set(key, controller);
        this.#log(`${key}: platform endpoint found`);
        if (leading) controller.start();
      }
    }
    for (const [key, controller] of this.#controllers) {
      const service = this.#services.get(key);
      if (service && isManaged(service.metadata?.annotations)) continue;
      this.#controllers.delete(key);
      controller.remove().catch((error: unknown) => {
        this.metrics.apiErrors.inc({ operation: 'endpointslice' });
        this.#log(`${key}: could not delete its slice: ${(error as Error).message}`);
      });
    }
    if (fullList && leading) void this.#removeOrphans();
  }

  /**
   * Slices this manager wrote whose Service is no longer a platform endpoint (the annotation was removed
   * while no manager ran): deleted once every Service watch has listed, never before.
   */
  async #removeOrphans(): Promise<void> {
    if (!this.#watches.every((w) => w.synced) || !this.isLeader()) return;
    const namespaces = this.#options.namespaces.length > 0 ? this.#options.namespaces : [undefined];
    try {
      for (const namespace of namespaces) {
        for (const slice of await this.#kube.listManagedSlices(namespace, `${MANAGED_BY_LABEL}=${MANAGED_BY}`)) {
          const service = slice.metadata?.labels?.['kubernetes.io/service-name'];
          const key = `${slice.metadata?.namespace}/${service}`;
          if (this.#controllers.has(key) || !this.isLeader()) continue;
          await this.#kube.deleteSlice(slice.metadata?.namespace ?? '', slice.metadata?.name ?? '');
          this.metrics.sliceWrites.inc({ service: key, operation: 'delete' });
          this.#log(`${key}: deleted the orphaned slice ${slice.metadata?.name}`);
        }
      }
    } catch (error) {
      this.metrics.apiErrors.inc({ operation: 'endpointslice' });
      this.#log(`could not clean up orphaned slices: ${(error as Error).message}`);
    }
  }
}
