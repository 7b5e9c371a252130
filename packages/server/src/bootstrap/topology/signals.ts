import { isPublic, parseAddress } from '../ip.ts';
import { EXCLUDE_FROM_LB_LABEL, type GatewayServiceFacts, type NodeFacts, type TopologyFacts } from './facts.ts';

export type TopologyClass = 'A' | 'B' | 'C';
export type Confidence = 'high' | 'medium' | 'low';

/** One row of the evidence table. `hint` is the class it points to (null: informational only). */
export interface Signal {
  signal: string;
  detail: string;
  hint: TopologyClass | null;
  confidence: Confidence | null;
}

/**
 * providerID schemes of cloud providers whose load balancers handle hairpin traffic (class C), and of
 * distributions that set a providerID of their own on bare metal (no cloud at all).
 */
const CLOUD_SCHEMES = new Set([
  'aws',
  'gce',
  'azure',
  'digitalocean',
  'linode',
  'hcloud',
  'oci',
  'ibm',
  'alicloud',
  'scaleway',
  'exoscale',
  'openstack',
  'vultr',
  'upcloud',
  'civo',
  'tencentcloud',
  'huaweicloud',
  'ovhcloud',
]);
const DISTRIBUTION_SCHEMES = new Set(['rke2', 'k3s', 'kind', 'k0s', 'kwok', 'talos', 'microk8s', 'baremetal', 'metal3']);

function classify(address: string): 'public' | 'private' | 'invalid' {
  const parsed = parseAddress(address);
  if (!parsed) return 'invalid';
  return isPublic(parsed) ? 'public' : 'private';
}

function nodesHolding(address: string, nodes: NodeFacts[]): string[] {
  return nodes.filter((n) => [...n.internalIPs, ...n.externalIPs].includes(address)).map((n) => n.name);
}

function isMetalLb(service: GatewayServiceFacts, layer2Class: string): boolean {
  return service.loadBalancerClass !== '' && (service.loadBalancerClass === layer2Class || service.loadBalancerClass.includes('metallb'));
}

function shape(service: GatewayServiceFacts): string {
  return `${service.type}${service.loadBalancerClass ? ` (class ${service.loadBalancerClass})` : ' (no class)'}`;
}

/** The gateway Service's front door, by the discriminators of decision aid 2. */
function gatewaySignal(service: GatewayServiceFacts, facts: TopologyFacts): Signal {
  const name = `gateway service ${service.namespace}/${service.name}`;
  const signal = (detail: string, hint: TopologyClass | null, confidence: Confidence | null): Signal => ({
    signal: name,
    detail: `${shape(service)}; ${detail}`,
    hint,
    confidence,
  });
  if (service.externalIPs.length > 0) {
    const list = service.externalIPs.join(', ');
    if (service.externalIPs.some((ip) => classify(ip) !== 'public'))
      return signal(`externalIPs ${list} include a private address: the public address is translated upstream (1:1 NAT)`, 'A', 'medium');
    const holders = [...new Set(service.externalIPs.flatMap((ip) => nodesHolding(ip, facts.nodes)))];
    if (holders.length > 0)
      return signal(`externalIPs ${list} are public and bound on ${holders.join(', ')}: the node address is the front door`, 'B', 'high');
    return signal(`externalIPs ${list} are public but no node lists them among its addresses`, 'B', 'medium');
  }
  const ips = service.ingress.flatMap((i) => (i.ip ? [i.ip] : []));
  const hostnames = service.ingress.flatMap((i) => (i.hostname ? [i.hostname] : []));
  if (service.type === 'LoadBalancer' && isMetalLb(service, facts.layer2Class)) {
    if (ips.length === 0) return signal('no address assigned yet (MetalLB has not announced it)', null, null);
    if (ips.some((ip) => classify(ip) !== 'public'))
      return signal(`VIP ${ips.join(', ')} is private: the public address is translated upstream (1:1 NAT)`, 'A', 'medium');
    return signal(`VIP ${ips.join(', ')} is public: a load-balancer VIP in the nodes' broadcast domain`, 'B', 'high');
  }
  if (service.type === 'LoadBalancer') {
    if (hostnames.length > 0) return signal(`served at ${hostnames.join(', ')}: a cloud provider's load balancer`, 'C', 'high');
    if (ips.length === 0) return signal('pending: no controller assigned an address', null, null);
    if (ips.some((ip) => classify(ip) !== 'public'))
      return signal(`address ${ips.join(', ')} is private: the public address is translated upstream`, 'A', 'low');
    return signal(`address ${ips.join(', ')} is public and not MetalLB's: probably a cloud load balancer`, 'C', 'medium');
  }
  if (service.type === 'ClusterIP')
    return signal('no externalIPs: the layer `none` shape with its externalIPs cleared (a migration half done?)', null, null);
  return signal('no front-door address on the Service', null, null);
}

/** The address-layer discriminator: does the Service's shape match INGRESS_ADDRESS_LAYER? */
function layerSignal(facts: TopologyFacts, warnings: string[]): Signal {
  const row = (detail: string): Signal => ({ signal: 'address layer', detail, hint: null, confidence: null });
  if (!facts.addressLayer) return row('INGRESS_ADDRESS_LAYER not known (no cluster configuration read)');
  const layer = facts.addressLayer;
  const mismatched = facts.gatewayServices.filter((s) =>
    layer === 'none'
      ? s.externalIPs.length === 0 || s.type !== 'ClusterIP' || s.loadBalancerClass !== ''
      : s.externalIPs.length > 0 || s.type !== 'LoadBalancer' || s.loadBalancerClass === '',
  );
  const expected = layer === 'none' ? 'ClusterIP without class, with externalIPs' : 'LoadBalancer with a class, externalIPs cleared';
  if (facts.gatewayServices.length === 0) return row(`${layer}: expects ${expected}; no gateway Service to compare`);
  if (mismatched.length === 0) return row(`${layer}: the gateway Service is ${expected}, as expected`);
  const names = mismatched.map((s) => `${s.namespace}/${s.name}`).join(', ');
  warnings.push(
    `INGRESS_ADDRESS_LAYER is ${layer} but ${names} is not ${expected}: the layer change has not rolled out, or the configuration is stale; the gateway rows describe what runs.`,
  );
  return row(`${layer}: expects ${expected}, but ${names} is not`);
}

/** Computes the evidence table from the facts; `warnings` explain failures that would otherwise be silent. */
export function topologySignals(facts: TopologyFacts): { signals: Signal[]; warnings: string[] } {
  const signals: Signal[] = [];
  const warnings: string[] = [];
  const controlPlane = facts.nodes.filter((n) => n.controlPlane);

  signals.push(
    facts.platformEndpoints.length > 0
      ? {
          signal: 'platform endpoints',
          detail: `${facts.platformEndpoints.map((p) => `${p.namespace}/${p.name}${p.vip ? ` (VIP ${p.vip})` : ''}`).join(', ')}: the feature is on, so someone judged the cluster class A`,
          hint: 'A',
          confidence: 'medium',
        }
      : { signal: 'platform endpoints', detail: 'none (no Service has tenantry.io/backend-source)', hint: null, confidence: null },
  );

  const schemes = new Map<string, number>();
  for (const node of facts.nodes) {
    if (!node.providerID) continue;
    const scheme = node.providerID.includes('://') ? (node.providerID.split('://')[0] ?? '') : node.providerID;
    schemes.set(scheme, (schemes.get(scheme) ?? 0) + 1);
  }
  const cloud = [...schemes.keys()].filter((s) => CLOUD_SCHEMES.has(s));
  if (schemes.size === 0) signals.push({ signal: 'cloud provider', detail: 'no providerID on any node', hint: null, confidence: null });
  else {
    const detail = [...schemes.entries()].map(([s, n]) => `${s}:// on ${n} of ${facts.nodes.length} nodes`).join(', ');
    if (cloud.length > 0) {
      const all = (schemes.get(cloud[0] ?? '') ?? 0) === facts.nodes.length && cloud.length === 1;
      signals.push({
        signal: 'cloud provider',
        detail: `${detail}: a cloud provider integration${all ? '' : ' on part of the cluster'}`,
        hint: 'C',
        confidence: all ? 'medium' : 'low',
      });
    } else if ([...schemes.keys()].every((s) => DISTRIBUTION_SCHEMES.has(s)))
      signals.push({
        signal: 'cloud provider',
        detail: `${detail}: set by the distribution, not a cloud provider`,
        hint: null,
        confidence: null,
      });
    else signals.push({ signal: 'cloud provider', detail: `${detail}: a scheme this doctor does not know`, hint: null, confidence: null });
  }

  if (facts.gatewayServices.length === 0)
    signals.push({
      signal: 'gateway service',
      detail: `none in ${facts.gatewayNamespace} (no Service labelled gateway.envoyproxy.io/owning-gateway-name)`,
      hint: null,
      confidence: null,
    });
  for (const service of facts.gatewayServices) signals.push(gatewaySignal(service, facts));

  signals.push(layerSignal(facts, warnings));

  const workloads = facts.gatewayWorkloads.map((w) => `${w.kind} ${w.namespace}/${w.name} ${w.hostNetwork}`);
  signals.push({
    signal: 'gateway host network',
    detail:
      workloads.length > 0
        ? `${workloads.join(', ')} (true on every cluster since the ingress rework: not a discriminator)`
        : `no gateway workload in ${facts.gatewayNamespace}`,
    hint: null,
    confidence: null,
  });
  if (facts.platformEndpoints.length > 0 && facts.gatewayWorkloads.some((w) => !w.hostNetwork))
    warnings.push(
      'a gateway workload does not run in the host network: the edge gateway endpoint probes <node>:443, so those nodes never enter its slice.',
    );

  const excluded = controlPlane.filter((n) => n.excludedFromLoadBalancers).map((n) => n.name);
  signals.push({
    signal: 'load-balancer exclusion',
    detail:
      excluded.length > 0
        ? `${excluded.join(', ')} (${excluded.length} of ${controlPlane.length} control-plane nodes) carry ${EXCLUDE_FROM_LB_LABEL}`
        : `no control-plane node carries ${EXCLUDE_FROM_LB_LABEL}`,
    hint: null,
    confidence: null,
  });
  if (excluded.length > 0) {
    const what =
      excluded.length === controlPlane.length
        ? 'so no control-plane node announces the platform VIPs (they are never answered, and nothing logs an error)'
        : `so only ${controlPlane
            .filter((n) => !n.excludedFromLoadBalancers)
            .map((n) => n.name)
            .join(', ')} can announce the platform VIPs`;
    warnings.push(
      `MetalLB and cloud load balancers skip nodes labelled ${EXCLUDE_FROM_LB_LABEL} (kubeadm sets it on control-plane nodes), ${what}. Remove it where the VIPs must be announced: kubectl label node ${excluded[0]} ${EXCLUDE_FROM_LB_LABEL}-`,
    );
  }

  const describeNode = (n: NodeFacts) =>
    `${n.name} ${[...n.internalIPs.map((a) => `InternalIP ${a}`), ...n.externalIPs.map((a) => `ExternalIP ${a}`)].join(' ') || 'no addresses'}`;
  const publicNodes = controlPlane.filter((n) => [...n.internalIPs, ...n.externalIPs].some((a) => classify(a) === 'public'));
  const addresses = controlPlane.map(describeNode).join('; ') || 'no control-plane node';
  if (cloud.length > 0)
    signals.push({
      signal: 'node addresses',
      detail: `${addresses} (a cloud assigns these; not a discriminator)`,
      hint: null,
      confidence: null,
    });
  else if (publicNodes.length > 0)
    signals.push({
      signal: 'node addresses',
      detail: `${addresses}: ${publicNodes.map((n) => n.name).join(', ')} hold a public address`,
      hint: 'B',
      confidence: 'low',
    });
  else if (controlPlane.length > 0)
    // Private node addresses fit class A, but also B behind a public VIP, and C: no hint.
    signals.push({
      signal: 'node addresses',
      detail: `${addresses}: no control-plane node holds a public address`,
      hint: null,
      confidence: null,
    });
  else signals.push({ signal: 'node addresses', detail: 'no control-plane node found', hint: null, confidence: null });
  for (const node of controlPlane.filter((n) => n.internalIPs.length === 0))
    warnings.push(
      `${node.name} reports no InternalIP: the endpoint manager (backend.addressType InternalIP) leaves it out of every platform endpoint.`,
    );
  return { signals, warnings };
}
