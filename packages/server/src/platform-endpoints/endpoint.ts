import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { ScheduledTask, Scheduler } from '../infra/scheduler.ts';
import { type EndpointSettings, matchesNodeSelector, parseSettings, SettingsError } from './annotations.ts';
import { BackendHealth } from './health.ts';
import { type KubeClient, statusOf } from './kube.ts';
import type { EndpointMetrics } from './metrics.ts';
import type { Probe } from './probe.ts';
import { type Backend, desiredSlice, readyBackends, sliceMatches, sliceName } from './slice.ts';

export interface EndpointDeps {
  kube: KubeClient;
  scheduler: Scheduler;
  metrics: EndpointMetrics;
  probe: Probe;
  isLeader: () => boolean;
  nodes: () => Iterable<V1Node>;
  log: (message: string) => void;
  identity: string;
}

export function serviceKey(service: V1Service): string {
  return `${service.metadata?.namespace}/${service.metadata?.name}`;
}

/**
 * One platform endpoint (one annotated Service): probes its backend nodes every interval and keeps its
 * `<service>-mgr` slice listing exactly the healthy ones. Runs only on the leader.
 */
export class EndpointController {
  #service: V1Service;
  #settings: EndpointSettings | undefined;
  #settingsError: string | undefined;
  readonly #deps: EndpointDeps;
  readonly #health = new Map<string, BackendHealth>();
  /** The slice as last read or written; undefined until read in this leadership term. */
  #slice: V1EndpointSlice | undefined | null;
  #task: ScheduledTask | undefined;
  #running = false;
  readonly key: string;

  constructor(service: V1Service, deps: EndpointDeps) {
    this.#deps = deps;
    this.#service = service;
    this.key = serviceKey(service);
    this.#slice = undefined;
    this.#parse();
  }

  get settings(): EndpointSettings | undefined {
    return this.#settings;
  }

  /** A newer version of the Service (settings or ports may have changed). */
  update(service: V1Service): void {
    const before = this.#settingsError;
    this.#service = service;
    this.#parse();
    if (this.#running && this.#settingsError && this.#settingsError !== before) void this.#warnInvalid();
  }

  #parse(): void {
    try {
      this.#settings = parseSettings(this.#service.metadata?.annotations ?? {});
      this.#settingsError = undefined;
    } catch (error) {
      if (!(error instanceof SettingsError)) throw error;
      this.#settings = undefined;
      this.#settingsError = error.message;
    }
  }

  async #warnInvalid(): Promise<void> {
    this.#deps.log(`${this.key}: invalid settings, not probing: ${this.#settingsError}`);
    await this.#event('Warning', 'InvalidSettings', `not probing: ${this.#settingsError}`);
  }

  /** Starts probing (on becoming leader, or when the Service appears while leading). */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#slice = undefined;
    this.#health.clear();
    if (this.#settingsError) void this.#warnInvalid();
    this.#task = this.#deps.scheduler.schedule(0, () => this.#round());
  }

  stop(): void {
    this.#running = false;
    this.#task?.cancel();
    this.#deps.metrics.forgetService(this.key, [...this.#health.keys()]);
    this.#health.clear();
  }

  /** The Service is gone or no longer annotated: stop probing and delete the slice (leader only). */
  async remove(): Promise<void> {
    this.stop();
    if (!this.#deps.isLeader()) return;
    const namespace = this.#service.metadata?.namespace ?? '';
    const name = sliceName(this.#service.metadata?.name ?? '');
    const slice = await this.#deps.kube.getSlice(namespace, name);
    if (!slice) return;
    await this.#deps.kube.deleteSlice(namespace, name);
    this.#deps.metrics.sliceWrites.inc({ service: this.key, operation: 'delete' });
    this.#deps.log(`${this.key}: no longer a platform endpoint, deleted ${namespace}/${name}`);
  }

  /** The backends the Service's node selector and address type name right now. */
  #targets(settings: EndpointSettings): Backend[] {
    const targets: Backend[] = [];
    for (const node of this.#deps.nodes()) {
      if (!matchesNodeSelector(node.metadata?.labels, settings.nodeSelector)) continue;
      const address = node.status?.addresses?.find((a) => a.type === settings.addressType)?.address;
      if (address) targets.push({ nodeName: node.metadata?.name ?? '', address });
    }
    return targets;
  }

  async #round(): Promise<void> {
    if (!this.#running) return;
    const settings = this.#settings;
    const started = this.#deps.scheduler.nowMs();
    if (settings) {
      try {
        await this.#probeAndWrite(settings);
      } catch (error) {
        this.#deps.metrics.apiErrors.inc({ operation: 'endpointslice' });
        this.#deps.log(`${this.key}: ${(error as Error).message}`);
        this.#slice = undefined; // read it again next round
      }
    }
    if (!this.#running) return;
    const interval = settings?.health.intervalMs ?? 5000;
    this.#task = this.#deps.scheduler.schedule(Math.max(0, interval - (this.#deps.scheduler.nowMs() - started)), () => this.#round());
  }

  async #probeAndWrite(settings: EndpointSettings): Promise<void> {
    const namespace = this.#service.metadata?.namespace ?? '';
    if (this.#slice === undefined) {
      this.#slice = (await this.#deps.kube.getSlice(namespace, sliceName(this.#service.metadata?.name ?? ''))) ?? null;
      // A new leader carries on from the slice as it stands: nodes in it start healthy, others unjudged.
      // (Read again after a failed write, it changes no judgement already made.)
      for (const backend of readyBackends(this.#slice ?? undefined))
        if (!this.#health.has(backend.nodeName)) this.#health.set(backend.nodeName, new BackendHealth(true));
    }
    const targets = this.#targets(settings);
    const names = new Set(targets.map((t) => t.nodeName));
    for (const node of [...this.#health.keys()]) if (!names.has(node)) this.#health.delete(node);
    const results = await Promise.all(targets.map((t) => this.#deps.probe(t.address, settings.health)));
    if (!this.#running) return;
    for (const [i, target] of targets.entries()) {
      const result = results[i];
      if (!result) continue;
      const labels = { service: this.key, node: target.nodeName };
      this.#deps.metrics.probes.inc({ ...labels, result: result.healthy ? 'success' : 'failure' });
      this.#deps.metrics.probeSeconds.observe(labels, result.latencyMs / 1000);
      let health = this.#health.get(target.nodeName);
      if (!health) {
        health = new BackendHealth(undefined);
        this.#health.set(target.nodeName, health);
      }
      const change = health.record(result.healthy, settings.health, result.reason);
      this.#deps.metrics.backendHealthy.set(labels, health.healthy ? 1 : 0);
      const url = `${settings.health.scheme}://${target.address}:${settings.health.port}${settings.health.path}`;
      if (change === 'healthy')
        await this.#event(
          'Normal',
          'BackendHealthy',
          `node ${target.nodeName} (${target.address}) is healthy: GET ${url} answered ${result.status}`,
        );
      if (change === 'unhealthy')
        await this.#event(
          'Warning',
          'BackendUnhealthy',
          `node ${target.nodeName} (${target.address}) failed ${settings.health.failureThreshold} probe(s) in a row: GET ${url}${settings.health.host ? ` (SNI ${settings.health.host})` : ''}: ${result.reason}`,
        );
    }
    await this.#write(targets.filter((t) => this.#health.get(t.nodeName)?.healthy === true));
  }

  async #write(healthy: Backend[]): Promise<void> {
    const desired = desiredSlice(this.#service, healthy);
    if (this.#slice && sliceMatches(this.#slice, desired)) {
      this.#deps.metrics.sliceEndpoints.set({ service: this.key }, healthy.length);
      return;
    }
    for (let attempt = 0; ; attempt++) {
      // Checked right before each write: a replica that lost the lease mid-round never writes.
      if (!this.#running || !this.#deps.isLeader()) return;
      try {
        const current = this.#slice;
        this.#slice = current
          ? await this.#deps.kube.replaceSlice({
              ...desired,
              metadata: { ...desired.metadata, resourceVersion: current.metadata?.resourceVersion ?? '' },
            })
          : await this.#deps.kube.createSlice(desired);
        this.#deps.metrics.sliceWrites.inc({ service: this.key, operation: current ? 'update' : 'create' });
        break;
      } catch (error) {
        // Someone else wrote the slice (or it was deleted): read it again and retry once.
        if (attempt > 0 || ![404, 409].includes(statusOf(error))) throw error;
        this.#slice = (await this.#deps.kube.getSlice(desired.metadata?.namespace ?? '', desired.metadata?.name ?? '')) ?? null;
        if (this.#slice && sliceMatches(this.#slice, desired)) return;
      }
    }
    this.#deps.metrics.sliceEndpoints.set({ service: this.key }, healthy.length);
    const list = healthy.map((b) => `${b.nodeName}=${b.address}`).join(', ');
    await this.#event(
      'Normal',
      'EndpointsUpdated',
      `${desired.metadata?.name}: ${healthy.length} ready${list ? ` (${list})` : ' (no healthy backend)'}`,
    );
  }

  async #event(type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    if (!this.#deps.isLeader()) return;
    try {
      await this.#deps.kube.emitEvent(this.#service, type, reason, message, this.#deps.scheduler.now(), this.#deps.identity);
    } catch (error) {
      // Events are for people; a failed one must not stop the slice from being kept.
      this.#deps.metrics.apiErrors.inc({ operation: 'event' });
      this.#deps.log(`${this.key}: could not record event ${reason}: ${(error as Error).message}`);
    }
  }
}
