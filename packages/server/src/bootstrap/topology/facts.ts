import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { BootstrapKube } from '../kube.ts';
import { unreadable } from '../kube.ts';
import { isPlatformEndpoint } from '../network.ts';

const CONTROL_PLANE_LABELS = ['node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master'];
export const EXCLUDE_FROM_LB_LABEL = 'node.kubernetes.io/exclude-from-external-load-balancers';
/** Envoy Gateway labels the Services and workloads it generates for a Gateway with this. */
const GATEWAY_OWNER_LABEL = 'gateway.envoyproxy.io/owning-gateway-name';

export interface NodeFacts {
  name: string;
  controlPlane: boolean;
  providerID: string;
  internalIPs: string[];
  externalIPs: string[];
  excludedFromLoadBalancers: boolean;
}

export interface GatewayServiceFacts {
  namespace: string;
  name: string;
  type: string;
  loadBalancerClass: string;
  externalIPs: string[];
  ingress: Array<{ ip?: string; hostname?: string }>;
}

interface GatewayWorkloadFacts {
  kind: 'Deployment' | 'DaemonSet';
  namespace: string;
  name: string;
  hostNetwork: boolean;
}

/** Everything the topology signals are computed from: plain data, so the signals and the verdict are pure. */
export interface TopologyFacts {
  platformEndpoints: Array<{ namespace: string; name: string; vip: string }>;
  nodes: NodeFacts[];
  gatewayNamespace: string;
  gatewayServices: GatewayServiceFacts[];
  gatewayWorkloads: GatewayWorkloadFacts[];
  /** INGRESS_ADDRESS_LAYER from the cluster configuration, when one was read. */
  addressLayer?: string;
  /** The load-balancer class the chart's endpoints use (MetalLB's layer 2). */
  layer2Class: string;
}

export function nodeFacts(node: V1Node): NodeFacts {
  const labels = node.metadata?.labels ?? {};
  const addresses = node.status?.addresses ?? [];
  return {
    name: node.metadata?.name ?? '',
    controlPlane: CONTROL_PLANE_LABELS.some((label) => label in labels),
    providerID: node.spec?.providerID ?? '',
    internalIPs: addresses.filter((a) => a.type === 'InternalIP').map((a) => a.address),
    externalIPs: addresses.filter((a) => a.type === 'ExternalIP').map((a) => a.address),
    excludedFromLoadBalancers: EXCLUDE_FROM_LB_LABEL in labels,
  };
}

function gatewayService(service: V1Service): GatewayServiceFacts {
  return {
    namespace: service.metadata?.namespace ?? '',
    name: service.metadata?.name ?? '',
    type: service.spec?.type ?? 'ClusterIP',
    loadBalancerClass: service.spec?.loadBalancerClass ?? '',
    externalIPs: service.spec?.externalIPs ?? [],
    ingress: (service.status?.loadBalancer?.ingress ?? []).map((i) => ({
      ...(i.ip ? { ip: i.ip } : {}),
      ...(i.hostname ? { hostname: i.hostname } : {}),
    })),
  };
}

/** Reads the cluster; any failed read means it cannot be classified (exit 3). */
export async function gatherTopologyFacts(
  kube: BootstrapKube,
  options: { gatewayNamespace: string; gatewayService?: { namespace: string; name: string }; addressLayer?: string; layer2Class: string },
): Promise<TopologyFacts> {
  const read = async <T>(what: string, call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      throw unreadable(what, error);
    }
  };
  const nodes = await read('nodes', () => kube.listNodes());
  const services = await read('services', () => kube.listServices());
  const chosen = options.gatewayService;
  const gateway = services.filter((s) =>
    chosen
      ? s.metadata?.namespace === chosen.namespace && s.metadata?.name === chosen.name
      : s.metadata?.namespace === options.gatewayNamespace && s.metadata?.labels?.[GATEWAY_OWNER_LABEL] !== undefined,
  );
  const workloadNamespace = chosen?.namespace ?? options.gatewayNamespace;
  const deployments = await read(`deployments in ${workloadNamespace}`, () => kube.listDeployments(workloadNamespace, GATEWAY_OWNER_LABEL));
  const daemonSets = await read(`daemonsets in ${workloadNamespace}`, () => kube.listDaemonSets(workloadNamespace, GATEWAY_OWNER_LABEL));
  return {
    platformEndpoints: services.filter(isPlatformEndpoint).map((s) => ({
      namespace: s.metadata?.namespace ?? '',
      name: s.metadata?.name ?? '',
      vip: s.spec?.loadBalancerIP ?? s.status?.loadBalancer?.ingress?.[0]?.ip ?? '',
    })),
    nodes: nodes.map(nodeFacts).sort((a, b) => a.name.localeCompare(b.name)),
    gatewayNamespace: workloadNamespace,
    gatewayServices: gateway.map(gatewayService).sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`)),
    gatewayWorkloads: [
      ...deployments.map((d) => ({
        kind: 'Deployment' as const,
        namespace: d.metadata?.namespace ?? '',
        name: d.metadata?.name ?? '',
        hostNetwork: d.spec?.template?.spec?.hostNetwork === true,
      })),
      ...daemonSets.map((d) => ({
        kind: 'DaemonSet' as const,
        namespace: d.metadata?.namespace ?? '',
        name: d.metadata?.name ?? '',
        hostNetwork: d.spec?.template?.spec?.hostNetwork === true,
      })),
    ],
    ...(options.addressLayer ? { addressLayer: options.addressLayer } : {}),
    layer2Class: options.layer2Class,
  };
}
