import { bundledSource, type CatalogueSource, FileSource } from './sources.ts';

/**
 * Where the catalogue is read from (decision 130): TENANTRY_OS_IMAGES_FILE when it is set (a mounted
 * `images-configmap`), else the `images-configmap` ConfigMap itself on the `kubernetes` platform, else the
 * bundled example.
 */
export async function catalogueSourceFor(config: {
  osImagesFile: string | undefined;
  platform: 'sandbox' | 'kubernetes';
  /** The kubernetes platform's cluster access: the same kubeconfig (or service account) and namespace as the driver. */
  kubernetes?: { kubeconfig: string | undefined; namespace: string } | undefined;
}): Promise<CatalogueSource> {
  if (config.osImagesFile) return new FileSource(config.osImagesFile);
  if (config.platform === 'kubernetes') {
    // Loaded only here: the Kubernetes client is large, and the sandbox never needs it.
    const { KubeConfig } = await import('@kubernetes/client-node');
    const { ConfigMapSource } = await import('./configmap-source.ts');
    const kubeConfig = new KubeConfig();
    if (config.kubernetes?.kubeconfig) kubeConfig.loadFromFile(config.kubernetes.kubeconfig);
    else kubeConfig.loadFromCluster();
    return ConfigMapSource.fromKubeConfig(kubeConfig, config.kubernetes?.namespace);
  }
  return bundledSource();
}
