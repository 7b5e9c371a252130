import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BootstrapKube } from '../src/bootstrap/kube.ts';
import { KubeApi, type KubeObject } from './kube-api/index.ts';

/**
 * Clusters for the bootstrap suites, seeded into the Kubernetes API double: nodes, the Envoy Gateway Service
 * and workload, Kube-OVN's external subnet and router ports, per-project resolvers and the cluster
 * configuration. Shapes follow what the real controllers write (Kube-OVN, Envoy Gateway, MetalLB).
 */
export const CONTROL_PLANE = 'node-role.kubernetes.io/control-plane';
export const EXCLUDE_LB = 'node.kubernetes.io/exclude-from-external-load-balancers';
export const GATEWAY_NS = 'envoy-gateway-system';

export interface NodeSpec {
  name: string;
  controlPlane?: boolean;
  internal?: string;
  external?: string;
  providerID?: string;
  excluded?: boolean;
}

export function node(spec: NodeSpec): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: spec.name,
      labels: {
        'kubernetes.io/hostname': spec.name,
        ...(spec.controlPlane ? { [CONTROL_PLANE]: '' } : {}),
        ...(spec.excluded ? { [EXCLUDE_LB]: '' } : {}),
      },
    },
    spec: spec.providerID ? { providerID: spec.providerID } : {},
    status: {
      addresses: [
        ...(spec.internal ? [{ type: 'InternalIP', address: spec.internal }] : []),
        ...(spec.external ? [{ type: 'ExternalIP', address: spec.external }] : []),
        { type: 'Hostname', address: spec.name },
      ],
    },
  };
}

export function ensureNamespace(kube: KubeApi, name: string): void {
  if (!kube.tryGet('v1', 'Namespace', name)) kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
}

export interface GatewaySpec {
  name?: string;
  type: 'ClusterIP' | 'LoadBalancer';
  loadBalancerClass?: string;
  externalIPs?: string[];
  ingressIp?: string;
  ingressHostname?: string;
}

/** The Service Envoy Gateway generates for a Gateway (label gateway.envoyproxy.io/owning-gateway-name). */
export function seedGateway(kube: KubeApi, spec: GatewaySpec, hostNetwork = true): void {
  ensureNamespace(kube, GATEWAY_NS);
  const name = spec.name ?? 'envoy-platform-edge-4f7d1c2a';
  const labels = { 'gateway.envoyproxy.io/owning-gateway-name': 'edge', 'gateway.envoyproxy.io/owning-gateway-namespace': GATEWAY_NS };
  kube.create({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: GATEWAY_NS, labels },
    spec: {
      type: spec.type,
      ...(spec.loadBalancerClass ? { loadBalancerClass: spec.loadBalancerClass } : {}),
      ...(spec.externalIPs ? { externalIPs: spec.externalIPs } : {}),
      ports: [{ name: 'https', port: 443, targetPort: 10443 }],
    },
    ...(spec.ingressIp || spec.ingressHostname
      ? {
          status: {
            loadBalancer: {
              ingress: [
                { ...(spec.ingressIp ? { ip: spec.ingressIp } : {}), ...(spec.ingressHostname ? { hostname: spec.ingressHostname } : {}) },
              ],
            },
          },
        }
      : {}),
  });
  if (!kube.tryGet('apps/v1', 'DaemonSet', name, GATEWAY_NS))
    kube.create({
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name, namespace: GATEWAY_NS, labels },
      spec: {
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { hostNetwork, containers: [{ name: 'envoy', image: 'envoyproxy/envoy:distroless-v1.34.1' }] },
        },
      },
    });
}

/** A platform endpoint Service as the chart renders it (the annotation the manager reads). */
export function seedPlatformEndpoint(kube: KubeApi, name: string, namespace: string, vip: string): void {
  ensureNamespace(kube, namespace);
  kube.create({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, annotations: { 'tenantry.io/backend-source': 'node-control-plane' } },
    spec: { type: 'LoadBalancer', loadBalancerClass: 'metallb.io/l2', loadBalancerIP: vip, ports: [{ port: 443 }] },
  });
}

function crd(plural: string, kind: string): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.kubeovn.io` },
    spec: {
      group: 'kubeovn.io',
      names: { kind, plural },
      scope: 'Cluster',
      versions: [{ name: 'v1', served: true, storage: true, subresources: { status: {} } }],
    },
  };
}

export interface KubeOvnSpec {
  cidr?: string;
  gateway?: string;
  excludeIps?: string[];
  /** OvnEips: name → [type, address]. */
  eips?: Record<string, ['lrp' | 'nat' | 'lsp', string]>;
  /** OvnSnatRules: name → [vpc, eip address]. */
  snats?: Record<string, [string, string]>;
}

/** Kube-OVN's CRDs and the external subnet `ext-cloud` with its router ports, EIPs and SNAT rules. */
export function seedKubeOvn(kube: KubeApi, spec: KubeOvnSpec = {}): void {
  for (const [plural, kind] of [
    ['subnets', 'Subnet'],
    ['ovn-eips', 'OvnEip'],
    ['ovn-snat-rules', 'OvnSnatRule'],
    ['ovn-fips', 'OvnFip'],
    ['ips', 'IP'],
  ] as const)
    kube.create(crd(plural, kind));
  kube.create({
    apiVersion: 'kubeovn.io/v1',
    kind: 'Subnet',
    metadata: { name: 'ext-cloud' },
    spec: {
      protocol: 'IPv4',
      cidrBlock: spec.cidr ?? '100.65.0.0/16',
      gateway: spec.gateway ?? '100.65.0.1',
      excludeIps: spec.excludeIps ?? ['100.65.0.1..100.65.0.100'],
    },
  });
  const eips = spec.eips ?? {
    'ovn-cluster-ext-cloud': ['lrp', '100.65.0.2'],
    'vpc-p1-ext-cloud': ['lrp', '100.65.0.101'],
    'eip-p1-web': ['nat', '100.65.0.150'],
  };
  for (const [name, [type, address]] of Object.entries(eips))
    kube.create({
      apiVersion: 'kubeovn.io/v1',
      kind: 'OvnEip',
      metadata: { name },
      spec: { externalSubnet: 'ext-cloud', type },
      status: { type, v4Ip: address, ready: true },
    });
  for (const [name, [vpc, address]] of Object.entries(spec.snats ?? { 'snat-p1': ['vpc-p1', '100.65.0.151'] }))
    kube.create({
      apiVersion: 'kubeovn.io/v1',
      kind: 'OvnSnatRule',
      metadata: { name },
      spec: { vpc, vpcSubnet: `${vpc}-default` },
      status: { vpc, v4Eip: address, ready: true },
    });
}

/** Kube-OVN's vpc-dns Corefile (its documentation's `vpc-dns-corefile`). */
export const KUBE_OVN_COREFILE = `.:53 {
    errors
    health {
      lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
    }
    prometheus :9153
    forward . /etc/resolv.conf {
      prefer_udp
    }
    cache 30
    loop
    reload
    loadbalance
}`;

/** A configuration in which every rule passes (with seedKubeOvn's defaults and three control-plane nodes). */
export const GOOD_CONFIG: Record<string, string> = {
  EXT_NET_NAME: 'ext-cloud',
  EXT_NET_CIDR: '100.65.0.0/16',
  EXT_NET_GATEWAY: '100.65.0.1',
  EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.100',
  INGRESS_GLOBAL_ALLOWLIST: '["100.65.0.2","100.65.0.30","100.65.0.31"]',
  EGRESS_GLOBAL_ALLOWLIST: '["100.65.0.2","100.65.0.30","100.65.0.31"]',
  PLATFORM_ENDPOINT_KUBE_API_ENABLED: 'true',
  KUBE_API_INTERNAL_VIP: '100.65.0.30',
  PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED: 'true',
  EDGE_GATEWAY_INTERNAL_VIP: '100.65.0.31',
  EXT_NET_ANCHOR_IPS: 'cp-1=100.65.0.11,cp-2=100.65.0.12,cp-3=100.65.0.13',
  INGRESS_ADDRESS_LAYER: 'lb-l2',
};

export const GOOD_VALUES = `platform:
  hostnames:
    kubeAPI: kube-api.example.com
    console: console.example.com
    login: login.example.com
    backend: backend.example.com
    billing: billing.example.com
    s3: s3.example.com
    extra: [grafana.example.com]
platformEndpoints:
  kubeAPI:
    enabled: true
    vip: 100.65.0.30
  edgeGateway:
    enabled: true
    vip: 100.65.0.31
    backend:
      health:
        host: console.example.com
`;

/** The cluster configuration ConfigMap where a GitOps install keeps it (flux-system/cluster-config). */
export function seedClusterConfig(kube: KubeApi, data: Record<string, string>): void {
  ensureNamespace(kube, 'flux-system');
  const existing = kube.tryGet('v1', 'ConfigMap', 'cluster-config', 'flux-system');
  if (existing) kube.update({ ...existing, data });
  else kube.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cluster-config', namespace: 'flux-system' }, data });
}

/**
 * Three control-plane nodes on a private network (192.168.110.11-13) and one worker. `providerID` is a
 * prefix (`rke2://`, `aws:///eu-west-1a/`) completed with the node's name; `external` a prefix too.
 */
export function seedNodes(kube: KubeApi, extra: { providerID?: string; external?: string; excluded?: boolean } = {}): void {
  const spec = (name: string, i: number, controlPlane: boolean): NodeSpec => ({
    name,
    controlPlane,
    internal: `192.168.110.${controlPlane ? 10 + i : 20 + i}`,
    ...(extra.providerID ? { providerID: `${extra.providerID}${name}` } : {}),
    ...(extra.external && controlPlane ? { external: `${extra.external}${10 + i}` } : {}),
    ...(extra.excluded && controlPlane ? { excluded: true } : {}),
  });
  for (const i of [1, 2, 3]) kube.create(node(spec(`cp-${i}`, i, true)));
  kube.create(node(spec('worker-1', 1, false)));
}

export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `tenantry-${prefix}-`));
}

export async function writeTemp(dir: string, name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

export async function startCluster(): Promise<{ kube: KubeApi; client: BootstrapKube }> {
  const kube = await KubeApi.start();
  return { kube, client: new BootstrapKube(kube.kubeConfig('operator')) };
}
