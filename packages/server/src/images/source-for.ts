import { bundledSource, type CatalogueSource, FileSource } from './sources.ts';

/**
 * Where the catalogue is read from: TENANTRY_OS_IMAGES_FILE when it is set (a mounted `images-configmap`),
 * else Kube-DC's `images-configmap` ConfigMap in its namespace (TENANTRY_KUBE_DC_NAMESPACE) on the
 * `kubernetes` platform, else the bundled example.
 */
export async function catalogueSourceFor(config: {
  osImagesFile: string | undefined;
  platform: 'sandbox' | 'kubernetes';
  /** The kubernetes platform's cluster access (the driver's kubeconfig or service account), and Kube-DC's namespace. */
  kubernetes?: { kubeconfig: string | undefined; kubeDcNamespace: string } | undefined;
}): Promise<CatalogueSource> {
  if (config.osImagesFile) return new FileSource(config.osImagesFile);
  if (config.platform === 'kubernetes') {
    // Loaded only here: the Kubernetes client is large, and the sandbox never needs it.
    const { KubeConfig } = await import('@kubernetes/client-node');
    const { ConfigMapSource } = await import('./configmap-source.ts');
    const kubeConfig = new KubeConfig();
    if (config.kubernetes?.kubeconfig) kubeConfig.loadFromFile(config.kubernetes.kubeconfig);
    else kubeConfig.loadFromCluster();
    // Kube-DC's chart writes the catalogue into its own release namespace (templates/os-images-configmap.yaml).
    return ConfigMapSource.fromKubeConfig(kubeConfig, config.kubernetes?.kubeDcNamespace);
  }
  return bundledSource();
}
