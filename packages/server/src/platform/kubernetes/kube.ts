import {
  ApiException,
  createConfiguration,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  ServerConfiguration,
} from '@kubernetes/client-node';
import { refuseInTransaction } from '../../infra/db/transactions.ts';

/**
 * How long one Kubernetes call may take. The client's own default (undici's) is 300 s: an API server that
 * takes the connection and never answers would hold an operation's look (and, on the embedded database,
 * the whole engine) for minutes. Past this a call is "no answer": the step is looked at again.
 */
export const KUBE_CALL_TIMEOUT_MS = 15_000;

/** An object as the driver reads it: metadata plus whatever spec and status its kind has. */
export interface KubeObject extends KubernetesObject {
  metadata: NonNullable<KubernetesObject['metadata']>;
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  data?: Record<string, string>;
}

/** The kinds the driver touches, by apiVersion and kind. Their list is the driver's RBAC (docs/platform-kubernetes.md). */
export const KINDS = {
  namespace: { apiVersion: 'v1', kind: 'Namespace' },
  configMap: { apiVersion: 'v1', kind: 'ConfigMap' },
  resourceQuota: { apiVersion: 'v1', kind: 'ResourceQuota' },
  organization: { apiVersion: 'kube-dc.com/v1', kind: 'Organization' },
  project: { apiVersion: 'kube-dc.com/v1', kind: 'Project' },
  partner: { apiVersion: 'kube-dc.com/v1', kind: 'Partner' },
  hrq: { apiVersion: 'hnc.x-k8s.io/v1alpha2', kind: 'HierarchicalResourceQuota' },
  vm: { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachine' },
  dataVolume: { apiVersion: 'cdi.kubevirt.io/v1beta1', kind: 'DataVolume' },
  limitRange: { apiVersion: 'v1', kind: 'LimitRange' },
  database: { apiVersion: 'db.kube-dc.com/v1alpha1', kind: 'KdcDatabase' },
  cnpgCluster: { apiVersion: 'postgresql.cnpg.io/v1', kind: 'Cluster' },
} as const;

export type Kind = (typeof KINDS)[keyof typeof KINDS];

/** The HTTP status of a failed API call; 0 for a network error (no answer). */
export function kubeStatus(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code;
  if (error instanceof TypeError || isNetworkError(error)) return 0;
  return undefined;
}

function isNetworkError(error: unknown): boolean {
  const code = (error as { code?: unknown; cause?: { code?: unknown } } | undefined)?.cause?.code ?? (error as { code?: unknown })?.code;
  const name = (error as { name?: unknown; cause?: { name?: unknown } } | undefined)?.name;
  // A call that ran out of time (our timeout aborts the fetch) is no answer too.
  if (name === 'TimeoutError' || name === 'AbortError') return true;
  return typeof code === 'string' && /^(ECONN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|ENOTFOUND|EPIPE|UND_ERR)/.test(code);
}

/** The reason of a refusal (metav1.Status.reason: AlreadyExists, Conflict, NotFound, ...). */
export function kubeReason(error: unknown): string | undefined {
  if (!(error instanceof ApiException)) return undefined;
  const body = typeof error.body === 'string' ? safeJson(error.body) : error.body;
  const reason = (body as { reason?: unknown } | undefined)?.reason;
  return typeof reason === 'string' ? reason : undefined;
}

/** A write lost to a concurrent one (409 Conflict, not AlreadyExists): worth sending again at once. */
function isConflict(error: unknown): boolean {
  return kubeStatus(error) === 409 && kubeReason(error) !== 'AlreadyExists';
}

/** Sends a write again (up to three times) while it loses to concurrent writers. */
async function retryConflicts<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await write();
    } catch (error) {
      if (!isConflict(error) || attempt >= 3) throw error;
    }
  }
}

/** The API's own words for a refusal (metav1.Status.message), for an operation's error message. */
export function kubeMessage(error: unknown): string {
  if (error instanceof ApiException) {
    const body = typeof error.body === 'string' ? safeJson(error.body) : error.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    return typeof message === 'string' ? message : `HTTP ${error.code}`;
  }
  return (error as Error)?.message ?? String(error);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Every Kubernetes call the driver makes, through @kubernetes/client-node's generic object API (it resolves
 * a kind's resource by discovery, so core kinds and Kube-DC's custom resources go the same way).
 */
export class KubeClient {
  readonly #api: KubernetesObjectApi;

  /**
   * `impersonate`: the user every call is sent as (`Impersonate-User`), for the writes Kube-DC's admission
   * allows only to its own service accounts; the caller needs the `impersonate` verb on it.
   */
  constructor(kubeConfig: KubeConfig, options: { timeoutMs?: number; impersonate?: string } = {}) {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig names no current cluster');
    const timeoutMs = options.timeoutMs ?? KUBE_CALL_TIMEOUT_MS;
    const { impersonate } = options;
    // What KubeConfig.makeApiClient builds, plus a deadline on every request.
    this.#api = new KubernetesObjectApi(
      createConfiguration({
        baseServer: new ServerConfiguration(cluster.server, {}),
        authMethods: { default: kubeConfig },
        promiseMiddleware: [
          {
            pre: async (request) => {
              refuseInTransaction('KubeClient');
              request.setSignal(AbortSignal.timeout(timeoutMs));
              if (impersonate) request.setHeaderParam('Impersonate-User', impersonate);
              return request;
            },
            post: async (response) => response,
          },
        ],
      }),
    );
  }

  /** The object, or undefined when it does not exist. */
  async get(kind: Kind, name: string, namespace?: string): Promise<KubeObject | undefined> {
    try {
      return (await this.#api.read({ ...kind, metadata: { name, ...(namespace ? { namespace } : {}) } })) as KubeObject;
    } catch (error) {
      if (kubeStatus(error) === 404) return undefined;
      throw error;
    }
  }

  /**
   * Every object of the kind, in one request. Not paged: the generic client reads a custom resource's list
   * metadata as an object's and drops its `continue` token, so a paged list would silently stop at the
   * first page (tested with more than 500 Projects).
   */
  async list(kind: Kind, namespace?: string, labelSelector?: string): Promise<KubeObject[]> {
    const page = await this.#api.list(kind.apiVersion, kind.kind, namespace, undefined, undefined, undefined, undefined, labelSelector);
    return page.items as KubeObject[];
  }

  /** Creates the object; answers the existing one when it is already there (a repeated step). */
  async createOrGet(object: KubeObject): Promise<{ object: KubeObject; created: boolean }> {
    try {
      return { object: (await retryConflicts(() => this.#api.create(object))) as KubeObject, created: true };
    } catch (error) {
      if (kubeStatus(error) !== 409) throw error;
      const existing = await this.get(object as Kind, object.metadata.name ?? '', object.metadata.namespace);
      if (!existing) throw error;
      return { object: existing, created: false };
    }
  }

  /**
   * Creates the object; false when one of that name exists (it is left as it is). A 409 that is not
   * "already exists" (a conflict) is rethrown: the step is looked at again.
   */
  async createIfAbsent(object: KubeObject): Promise<boolean> {
    try {
      await retryConflicts(() => this.#api.create(object));
      return true;
    } catch (error) {
      if (kubeStatus(error) === 409 && (await this.get(object as Kind, object.metadata.name ?? '', object.metadata.namespace)))
        return false;
      throw error;
    }
  }

  /**
   * A JSON merge patch. With `resourceVersion` it is guarded (409 when someone wrote in between); the
   * caller re-reads and decides again.
   */
  async mergePatch(
    kind: Kind,
    name: string,
    namespace: string | undefined,
    patch: Record<string, unknown>,
    resourceVersion?: string,
  ): Promise<KubeObject> {
    const metadata = {
      ...((patch.metadata as object | undefined) ?? {}),
      name,
      ...(namespace ? { namespace } : {}),
      ...(resourceVersion ? { resourceVersion } : {}),
    };
    const send = () =>
      this.#api.patch({ ...kind, ...patch, metadata }, undefined, undefined, 'tenantry', undefined, PatchStrategy.MergePatch);
    // A guarded patch must not be resent blindly (the caller re-reads); an unguarded one can be.
    return (await (resourceVersion ? send() : retryConflicts(send))) as KubeObject;
  }

  /** Deletes the object (foreground by default: its dependents first); false when it was already gone. */
  async delete(kind: Kind, name: string, namespace?: string, propagationPolicy = 'Foreground'): Promise<boolean> {
    try {
      await this.#api.delete(
        { ...kind, metadata: { name, ...(namespace ? { namespace } : {}) } },
        undefined,
        undefined,
        undefined,
        undefined,
        propagationPolicy,
      );
      return true;
    } catch (error) {
      if (kubeStatus(error) === 404) return false;
      throw error;
    }
  }
}
