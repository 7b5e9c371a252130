import {
  ApiException,
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1ConfigMap,
  type V1DaemonSet,
  type V1Deployment,
  type V1Job,
  type V1Node,
  type V1Pod,
  type V1Service,
} from '@kubernetes/client-node';
import { KubeconfigError, loadKubeConfig as loadClusterConfig } from '../platform/kubernetes/kubeconfig.ts';
import { BootstrapError, EXIT } from './output.ts';

/** The HTTP status of a failed call (0 for a network error). */
export function statusOf(error: unknown): number {
  return error instanceof ApiException ? error.code : 0;
}

/** One line saying why a call failed: the API's Status message when there is one. */
export function describe(error: unknown): string {
  if (error instanceof ApiException) {
    const body = error.body as unknown;
    let message: string | undefined;
    if (typeof body === 'string') {
      try {
        message = (JSON.parse(body) as { message?: string }).message;
      } catch {
        message = body.slice(0, 200);
      }
    } else if (body && typeof body === 'object') message = (body as { message?: string }).message;
    return `HTTP ${error.code}${message ? `: ${message}` : ''}`;
  }
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message ?? String(error);
}

/** A read the command needs failed: the cluster cannot be read (exit 3). */
export function unreadable(what: string, error: unknown): BootstrapError {
  return new BootstrapError(`cannot read ${what}: ${describe(error)}`, EXIT.clusterUnreadable);
}

/** The cluster the command talks to (`--kubeconfig`, KUBECONFIG, ~/.kube/config, in-cluster); none found is bad input (2). */
export function loadKubeConfig(options: { kubeconfig?: string; context?: string }): KubeConfig {
  try {
    return loadClusterConfig(options);
  } catch (error) {
    if (error instanceof KubeconfigError) throw new BootstrapError(error.message, EXIT.badInput);
    throw error;
  }
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * Every call the bootstrap commands make, through @kubernetes/client-node; kept in one place so that the
 * permissions an operator needs can be read off it (docs/bootstrap.md lists them).
 */
export class BootstrapKube {
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #batch: BatchV1Api;
  readonly #custom: CustomObjectsApi;

  constructor(kubeConfig: KubeConfig) {
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#apps = kubeConfig.makeApiClient(AppsV1Api);
    this.#batch = kubeConfig.makeApiClient(BatchV1Api);
    this.#custom = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  async listNodes(): Promise<V1Node[]> {
    return (await this.#core.listNode()).items;
  }

  async listServices(namespace?: string, labelSelector?: string): Promise<V1Service[]> {
    const options = labelSelector ? { labelSelector } : {};
    return namespace
      ? (await this.#core.listNamespacedService({ namespace, ...options })).items
      : (await this.#core.listServiceForAllNamespaces(options)).items;
  }

  async listDeployments(namespace?: string, labelSelector?: string): Promise<V1Deployment[]> {
    const options = labelSelector ? { labelSelector } : {};
    return namespace
      ? (await this.#apps.listNamespacedDeployment({ namespace, ...options })).items
      : (await this.#apps.listDeploymentForAllNamespaces(options)).items;
  }

  async listDaemonSets(namespace: string, labelSelector?: string): Promise<V1DaemonSet[]> {
    return (await this.#apps.listNamespacedDaemonSet({ namespace, ...(labelSelector ? { labelSelector } : {}) })).items;
  }

  getDeployment(namespace: string, name: string): Promise<V1Deployment> {
    return this.#apps.readNamespacedDeployment({ namespace, name });
  }

  /** Merges annotations into a Deployment's pod template: a changed annotation rolls the pods, as `rollout restart` does. */
  patchTemplateAnnotations(namespace: string, name: string, annotations: Record<string, string>): Promise<V1Deployment> {
    return this.#apps.patchNamespacedDeployment(
      { namespace, name, body: { spec: { template: { metadata: { annotations } } } } },
      mergePatch,
    );
  }

  async getConfigMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    try {
      return await this.#core.readNamespacedConfigMap({ namespace, name });
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  /** Replaces a ConfigMap guarded by the resourceVersion it was read at (409 when someone wrote in between). */
  replaceConfigMap(configMap: V1ConfigMap): Promise<V1ConfigMap> {
    return this.#core.replaceNamespacedConfigMap({
      namespace: configMap.metadata?.namespace ?? '',
      name: configMap.metadata?.name ?? '',
      body: configMap,
    });
  }

  createJob(job: V1Job): Promise<V1Job> {
    return this.#batch.createNamespacedJob({ namespace: job.metadata?.namespace ?? '', body: job });
  }

  async getJob(namespace: string, name: string): Promise<V1Job | undefined> {
    try {
      return await this.#batch.readNamespacedJob({ namespace, name });
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  /** Deletes a Job and, in the background, its pods. */
  async deleteJob(namespace: string, name: string): Promise<void> {
    try {
      await this.#batch.deleteNamespacedJob({ namespace, name, propagationPolicy: 'Background' });
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
    }
  }

  async listPods(namespace: string, labelSelector: string): Promise<V1Pod[]> {
    return (await this.#core.listNamespacedPod({ namespace, labelSelector })).items;
  }

  /** A cluster-scoped custom resource list, or undefined when the type is not served (its plugin is not installed). */
  async listClusterCustom(group: string, version: string, plural: string): Promise<Array<Record<string, unknown>> | undefined> {
    try {
      const list = (await this.#custom.listClusterCustomObject({ group, version, plural })) as { items?: Array<Record<string, unknown>> };
      return list.items ?? [];
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }
}
