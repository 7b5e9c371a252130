import { readFileSync } from 'node:fs';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { CatalogueSource } from './sources.ts';

const IMAGES_CONFIGMAP = 'images-configmap';
const IMAGES_KEY = 'images.yaml';
const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The subset of the Kubernetes client the source uses (the API double and the real client both have it). */
export interface ConfigMapReader {
  readNamespacedConfigMap(request: { name: string; namespace: string }): Promise<{ data?: { [key: string]: string } }>;
}

/**
 * `images.yaml` read from the `images-configmap` ConfigMap through the Kubernetes API (the `kubernetes`
 * platform without a mounted file). Reading the object, rather than a mount, sees an edit at once
 * instead of after kubelet's sync period (up to a minute and more).
 */
export class ConfigMapSource implements CatalogueSource {
  readonly description: string;
  readonly #api: ConfigMapReader;
  readonly #namespace: string;
  readonly #name: string;

  constructor(api: ConfigMapReader, namespace: string, name = IMAGES_CONFIGMAP) {
    this.#api = api;
    this.#namespace = namespace;
    this.#name = name;
    this.description = `configmap ${namespace}/${name}`;
  }

  /** From a kubeconfig (in a pod: its service account) and the namespace Tenantry runs in. */
  static fromKubeConfig(kubeConfig: KubeConfig, namespace = podNamespace()): ConfigMapSource {
    return new ConfigMapSource(kubeConfig.makeApiClient(CoreV1Api), namespace);
  }

  async read(signal: AbortSignal): Promise<string> {
    // The generated client takes no signal per call: stop waiting on abort (its own timeouts end the request).
    const configMap = await abortable(this.#api.readNamespacedConfigMap({ name: this.#name, namespace: this.#namespace }), signal);
    const text = configMap.data?.[IMAGES_KEY];
    if (text === undefined) throw new Error(`${this.description} has no key ${IMAGES_KEY}`);
    return text;
  }
}

/** The namespace of the pod this process runs in, as its service account says; `default` outside a pod. */
function podNamespace(): string {
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim() || 'default';
  } catch {
    return 'default';
  }
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
