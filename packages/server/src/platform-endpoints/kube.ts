import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type V1EndpointSlice,
  type V1Lease,
  V1MicroTime,
  type V1Node,
  type V1Service,
  Watch,
} from '@kubernetes/client-node';

/** The HTTP status of a failed API call (0 for a network error). */
export function statusOf(error: unknown): number {
  return error instanceof ApiException ? error.code : 0;
}

export interface Listed<T> {
  items: T[];
  resourceVersion: string;
}

export type WatchCallback = (type: string, object: Record<string, unknown>) => void;

/**
 * Every Kubernetes call the manager makes, through @kubernetes/client-node. Kept in one place so that the
 * RBAC the chart grants can be read off it: services list/watch, nodes list/watch, endpointslices
 * get/create/update/delete/list, events create, leases get/create/update.
 */
export class KubeClient {
  readonly #core: CoreV1Api;
  readonly #discovery: DiscoveryV1Api;
  readonly #coordination: CoordinationV1Api;
  readonly #kubeConfig: KubeConfig;

  constructor(kubeConfig: KubeConfig) {
    this.#kubeConfig = kubeConfig;
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#discovery = kubeConfig.makeApiClient(DiscoveryV1Api);
    this.#coordination = kubeConfig.makeApiClient(CoordinationV1Api);
  }

  async listServices(namespace: string | undefined): Promise<Listed<V1Service>> {
    const list = namespace ? await this.#core.listNamespacedService({ namespace }) : await this.#core.listServiceForAllNamespaces();
    return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? '' };
  }

  async listNodes(): Promise<Listed<V1Node>> {
    const list = await this.#core.listNode();
    return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? '' };
  }

  async listManagedSlices(namespace: string | undefined, labelSelector: string): Promise<V1EndpointSlice[]> {
    const list = namespace
      ? await this.#discovery.listNamespacedEndpointSlice({ namespace, labelSelector })
      : await this.#discovery.listEndpointSliceForAllNamespaces({ labelSelector });
    return list.items;
  }

  /** Opens a watch; `done` is called once when it ends (null for a clean server-side close). */
  watch(
    path: string,
    resourceVersion: string,
    timeoutSeconds: number,
    onEvent: WatchCallback,
    done: (error: unknown) => void,
  ): Promise<AbortController> {
    const watch = new Watch(this.#kubeConfig);
    // client-node aborts a watch after 30 s without data (a private setting); a quiet cluster sends nothing
    // for minutes. The server ends the watch after timeoutSeconds, so the client's limit must be longer.
    (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = (timeoutSeconds + 30) * 1000;
    return watch.watch(path, { resourceVersion, allowWatchBookmarks: true, timeoutSeconds }, onEvent, done);
  }

  async getSlice(namespace: string, name: string): Promise<V1EndpointSlice | undefined> {
    try {
      return await this.#discovery.readNamespacedEndpointSlice({ namespace, name });
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  createSlice(slice: V1EndpointSlice): Promise<V1EndpointSlice> {
    return this.#discovery.createNamespacedEndpointSlice({ namespace: slice.metadata?.namespace ?? '', body: slice });
  }

  replaceSlice(slice: V1EndpointSlice): Promise<V1EndpointSlice> {
    return this.#discovery.replaceNamespacedEndpointSlice({
      namespace: slice.metadata?.namespace ?? '',
      name: slice.metadata?.name ?? '',
      body: slice,
    });
  }

  /** Deletes a slice; false when it was already gone. */
  async deleteSlice(namespace: string, name: string): Promise<boolean> {
    try {
      await this.#discovery.deleteNamespacedEndpointSlice({ namespace, name });
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw error;
    }
  }

  async emitEvent(
    service: V1Service,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
    at: Date,
    reporter: string,
  ): Promise<void> {
    const namespace = service.metadata?.namespace ?? 'default';
    await this.#core.createNamespacedEvent({
      namespace,
      body: {
        // A generateName is validated as a name prefix: a trailing dash is allowed, a trailing dot is refused (422).
        metadata: { generateName: `${service.metadata?.name}-`, namespace },
        involvedObject: {
          apiVersion: 'v1',
          kind: 'Service',
          name: service.metadata?.name ?? '',
          namespace,
          uid: service.metadata?.uid ?? '',
          ...(service.metadata?.resourceVersion ? { resourceVersion: service.metadata.resourceVersion } : {}),
        },
        type,
        reason,
        message: message.slice(0, 1024),
        count: 1,
        firstTimestamp: at,
        lastTimestamp: at,
        eventTime: new V1MicroTime(at.getTime()),
        source: { component: 'tenantry-endpoint-manager' },
        reportingComponent: 'endpoint-manager.tenantry.io',
        reportingInstance: reporter,
        action: reason,
      },
    });
  }

  async getLease(namespace: string, name: string): Promise<V1Lease | undefined> {
    try {
      return await this.#coordination.readNamespacedLease({ namespace, name });
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  createLease(lease: V1Lease): Promise<V1Lease> {
    return this.#coordination.createNamespacedLease({ namespace: lease.metadata?.namespace ?? '', body: lease });
  }

  replaceLease(lease: V1Lease): Promise<V1Lease> {
    return this.#coordination.replaceNamespacedLease({
      namespace: lease.metadata?.namespace ?? '',
      name: lease.metadata?.name ?? '',
      body: lease,
    });
  }
}
