import { bundledSource, type CatalogueSource, FileSource } from './sources.ts';

/**
 * Where the catalogue is read from: TENANTRY_OS_IMAGES_FILE when it is set (a mounted `images-configmap`),
 * else Kube-DC's `images-configmap` ConfigMap in its namespace (TENANTRY_KUBE_DC_NAMESPACE) when the
 * platform driver runs on a cluster, else the bundled example.
 */
export async function catalogueSourceFor(config: {
  osImagesFile: string | undefined;
  /** The driver's cluster access (its kubeconfig, or the service account when undefined), and Kube-DC's namespace. */
  cluster?: { kubeconfig: string | undefined; namespace: string } | undefined;
}): Promise<CatalogueSource> {
  if (config.osImagesFile) return new FileSource(config.osImagesFile);
  if (config.cluster) {
    // Loaded only here: the Kubernetes client is large, and the sandbox never needs it.
    const { KubeConfig } = await import('@kubernetes/client-node');
    const { ConfigMapSource } = await import('./configmap-source.ts');
    const kubeConfig = new KubeConfig();
    if (config.cluster.kubeconfig) kubeConfig.loadFromFile(config.cluster.kubeconfig);
    else kubeConfig.loadFromCluster();
    // Kube-DC's chart writes the catalogue into its own release namespace (templates/os-images-configmap.yaml).
    return ConfigMapSource.fromKubeConfig(kubeConfig, config.cluster.namespace);
  }
  return bundledSource();
}
