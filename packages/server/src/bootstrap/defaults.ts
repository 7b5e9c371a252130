/**
 * The defaults of the bootstrap commands, in one small module the CLI can import without loading the
 * Kubernetes client (docs/bootstrap.md says why each is what it is).
 */
/** Where a Flux install keeps the cluster configuration it substitutes into the manifests. */
export const DEFAULT_CONFIGMAP = 'flux-system/cluster-config';
/** Kube-OVN labels every per-VPC resolver Deployment (`vpc-dns-<name>`) with this. */
export const RESOLVER_SELECTOR = 'ovn.kubernetes.io/vpc-dns=true';
/** Kube-OVN's shared resolver configuration; edited even before any resolver mounts it. */
export const DEFAULT_COREFILE_CONFIGMAP = 'kube-system/vpc-dns-corefile';
/** TTL of the hosts answers: CoreDNS's `hosts` plugin answers with 3600 s unless told otherwise. */
export const DEFAULT_TTL_SECONDS = 30;
export const DEFAULT_ROLLOUT_TIMEOUT_SECONDS = 180;
/** Keycloak's discovery document for the master realm: the identity provider the platform runs. */
export const DEFAULT_WELL_KNOWN_PATH = '/realms/master/.well-known/openid-configuration';
export const DEFAULT_DIAGNOSTIC_IMAGE = 'curlimages/curl:8.11.1';
/** The anchor Jobs need `sh`, `ip`, `awk` and `cmp`: busybox has them all. */
export const DEFAULT_JOB_IMAGE = 'busybox:1.36.1';
export const DEFAULT_JOB_NAMESPACE = 'kube-system';
export const DEFAULT_NODE_TIMEOUT_SECONDS = 300;
export const DEFAULT_BRIDGE_TIMEOUT_SECONDS = 120;
