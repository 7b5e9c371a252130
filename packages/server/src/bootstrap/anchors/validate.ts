import { type ClusterConfig, KEYS, type Problem } from '../cluster-config.ts';
import { type Address, type Cidr, inCidr, inRange, sameAddress, subnetBounds } from '../ip.ts';
import type { NetworkFacts } from '../network.ts';
import type { NodeFacts } from '../topology/facts.ts';

/** One broken rule, on its own line: the rule's name, what it is about, and what is wrong. */
export interface Violation {
  rule: string;
  subject: string;
  message: string;
}

/** An anchor that passed every rule, with the prefix it is bound with (the external subnet's). */
export interface ResolvedAnchor {
  node: string;
  address: Address;
  /** `address/prefix` as `ip addr` takes it. */
  cidr: string;
}

interface AnchorInputs {
  config: ClusterConfig;
  problems: Problem[];
  nodes: NodeFacts[];
  network: NetworkFacts;
}

/** The external subnet: EXT_NET_CIDR, or else the live Kube-OVN Subnet's CIDR. */
export function externalSubnet(config: ClusterConfig, network: NetworkFacts): Cidr | undefined {
  return config.externalCidr ?? network.subnet?.cidr;
}

function covered(address: Address, allowlist: Cidr[]): Cidr | undefined {
  return allowlist.find((entry) => inCidr(address, entry));
}

/** The text of an allowlist hit: the address itself when listed alone, else the subnet that covers it. */
function hit(entry: Cidr, address: Address): string {
  return sameAddress(entry.address, address) && entry.prefix === (address.kind() === 'ipv4' ? 32 : 128)
    ? 'lists it'
    : `covers it (${entry.text})`;
}

/**
 * Every anchor rule of platform-deployment.md ("Cluster configuration fields", rules 2 and 3), re-run by
 * `anchors apply` and `doctor anchors` alike. Returns every violation (not just the first) and the anchors,
 * resolved to `ip/prefix`, when there is none.
 */
export function validateAnchors(inputs: AnchorInputs): { violations: Violation[]; anchors: ResolvedAnchor[] } {
  const { config, nodes, network } = inputs;
  const violations: Violation[] = [];
  const add = (rule: string, subject: string, message: string) => violations.push({ rule, subject, message });
  const relevant: string[] = [KEYS.anchors, KEYS.externalCidr, KEYS.excludeIps, KEYS.ingressAllowlist, KEYS.egressAllowlist];
  for (const problem of inputs.problems) if (relevant.includes(problem.field)) add('readable', problem.field, problem.message);

  const subnet = externalSubnet(config, network);
  if (!subnet)
    add(
      'external-subnet',
      KEYS.externalCidr,
      `the external subnet is unknown: set ${KEYS.externalCidr} (no Kube-OVN Subnet ${config.externalSubnetName} either)`,
    );
  const controlPlane = nodes.filter((n) => n.controlPlane);
  if (controlPlane.length === 0)
    add('one-per-control-plane-node', 'nodes', 'no control-plane node found (node-role.kubernetes.io/control-plane)');
  if (config.anchors.length === 0) add('one-per-control-plane-node', KEYS.anchors, 'is empty: every control-plane node needs an anchor');

  const byNode = new Map<string, number>();
  for (const anchor of config.anchors) byNode.set(anchor.node, (byNode.get(anchor.node) ?? 0) + 1);
  if (config.anchors.length > 0)
    for (const node of controlPlane)
      if (!byNode.has(node.name)) add('one-per-control-plane-node', node.name, 'control-plane node without an anchor');
  for (const [node, count] of byNode) if (count > 1) add('one-per-control-plane-node', node, `has ${count} anchors; one per node`);

  const resolved: ResolvedAnchor[] = [];
  const seen = new Map<string, string>();
  for (const anchor of config.anchors) {
    const ip = anchor.address.toString();
    const subject = `${anchor.node}=${ip}`;
    const node = nodes.find((n) => n.name === anchor.node);
    if (!node) add('control-plane-only', subject, `there is no node ${anchor.node}`);
    else if (!node.controlPlane) add('control-plane-only', subject, `${anchor.node} is not a control-plane node`);

    const other = seen.get(ip);
    if (other !== undefined && other !== anchor.node) add('no-duplicates', subject, `${ip} is also the anchor of ${other}`);
    seen.set(ip, anchor.node);

    if (subnet) {
      if (!inCidr(anchor.address, subnet)) add('in-external-subnet', subject, `${ip} is outside the external subnet ${subnet.text}`);
      else {
        const { network: first, broadcast } = subnetBounds(subnet);
        if (sameAddress(anchor.address, first)) add('in-external-subnet', subject, `${ip} is the subnet's network address`);
        if (anchor.address.kind() === 'ipv4' && sameAddress(anchor.address, broadcast))
          add('in-external-subnet', subject, `${ip} is the subnet's broadcast address`);
      }
      if (anchor.prefix !== undefined && anchor.prefix !== subnet.prefix)
        add('in-external-subnet', subject, `written with /${anchor.prefix}; the external subnet ${subnet.text} has /${subnet.prefix}`);
    }
    const gateway = config.externalGateway ?? network.subnet?.gateway;
    if (gateway && sameAddress(anchor.address, gateway)) add('in-external-subnet', subject, `${ip} is the external subnet's gateway`);

    if (!config.excludeIps.some((range) => inRange(anchor.address, range)))
      add('in-exclude-ips', subject, `${ip} is not in ${KEYS.excludeIps}, so the address manager may hand it to a project`);

    for (const [key, list] of [
      [KEYS.ingressAllowlist, config.ingressAllowlist],
      [KEYS.egressAllowlist, config.egressAllowlist],
    ] as const) {
      const entry = covered(anchor.address, list);
      if (entry) add('not-in-allowlist', subject, `${key} ${hit(entry, anchor.address)}: anchors stay out of the allowlists`);
    }

    const management = network.managementRouterPort;
    if (management && sameAddress(anchor.address, management.address))
      add('not-management-router-port', subject, `${ip} is the management router port's address (${management.owner}); never reuse it`);
    for (const port of network.routerPorts)
      if (sameAddress(anchor.address, port.address) && !(management && sameAddress(port.address, management.address)))
        add(
          'not-router-port',
          subject,
          `${ip} is a logical-router-port address (${port.owner}); two ARP answers would flip the upstream router's cache`,
        );

    for (const [label, vip] of [
      [KEYS.kubeApiVip, config.kubeApi.vip],
      [KEYS.edgeGatewayVip, config.edgeGateway.vip],
    ] as const)
      if (vip && sameAddress(anchor.address, vip)) add('not-in-use', subject, `${ip} is ${label}`);
    for (const used of [
      ...network.projectAddresses,
      ...network.systemSnat.filter((s) => !management || !sameAddress(s.address, management.address)),
    ])
      if (sameAddress(anchor.address, used.address)) add('not-in-use', subject, `${ip} is in use by ${used.owner}`);

    if (subnet) resolved.push({ node: anchor.node, address: anchor.address, cidr: `${ip}/${subnet.prefix}` });
  }
  resolved.sort((a, b) => a.node.localeCompare(b.node));
  return { violations, anchors: violations.length === 0 ? resolved : [] };
}
