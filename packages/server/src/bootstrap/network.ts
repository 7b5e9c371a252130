import type { V1Service } from '@kubernetes/client-node';
import { type Address, type AddressRange, type Cidr, inCidr, parseAddress, parseCidr, parseRange, sameAddress } from './ip.ts';
import type { BootstrapKube } from './kube.ts';
import { unreadable } from './kube.ts';

/** Kube-OVN's default VPC: its router port into the external subnet is the management router port. */
const MANAGEMENT_VPC = 'ovn-cluster';
const GROUP = 'kubeovn.io';
const VERSION = 'v1';

export interface UsedAddress {
  address: Address;
  /** What holds it, for messages: `OvnEip vpc1-ext-cloud (router port)`, `Service tenants/web`. */
  owner: string;
}

/** What the network plugin (Kube-OVN) and the cluster's Services hold in the external subnet. */
export interface NetworkFacts {
  /** Kube-OVN resources were found (false: not installed, so there is nothing of it to collide with). */
  kubeOvn: boolean;
  /** Logical-router-port addresses (OvnEip type `lrp`, and the northbound listing when given). */
  routerPorts: UsedAddress[];
  /** The default VPC's router port into the external subnet (`ovn-cluster-<subnet>`), when found. */
  managementRouterPort?: UsedAddress;
  /** Addresses of projects: EIPs, floating IPs, NAT rules, IPAM records, other Services' load-balancer IPs. */
  projectAddresses: UsedAddress[];
  /** System SNAT: the management router port and the SNAT rules of the default VPC. */
  systemSnat: UsedAddress[];
  /** The live external Subnet, when Kube-OVN serves it. */
  subnet?: { name: string; cidr?: Cidr; gateway?: Address; excludeIps: AddressRange[] };
  notes: string[];
}

type Obj = Record<string, unknown>;

function field(object: Obj, path: string): unknown {
  return path.split('.').reduce<unknown>((node, key) => (node && typeof node === 'object' ? (node as Obj)[key] : undefined), object);
}

function text(object: Obj, ...paths: string[]): string {
  for (const path of paths) {
    const value = field(object, path);
    if (typeof value === 'string' && value.trim() !== '') return value.trim();
  }
  return '';
}

function nameOf(object: Obj): string {
  return text(object, 'metadata.name');
}

/**
 * Reads `ovn-nbctl --columns=name,networks list logical_router_port` output: `name : x` and
 * `networks : ["100.65.0.2/16"]` records separated by blank lines.
 */
export function parseNorthboundListing(listing: string): Array<{ name: string; address: Address }> {
  const ports: Array<{ name: string; address: Address }> = [];
  for (const record of listing.split(/\n\s*\n/)) {
    const name = /^\s*name\s*:\s*"?([^"\n]+?)"?\s*$/m.exec(record)?.[1];
    const networks = /^\s*networks\s*:\s*\[([^\]]*)\]/m.exec(record)?.[1];
    if (!name || networks === undefined) continue;
    for (const entry of networks.split(',')) {
      const cidr = parseCidr(entry.trim().replace(/^"|"$/g, ''));
      if (cidr) ports.push({ name, address: cidr.address });
    }
  }
  return ports;
}

function push(list: UsedAddress[], value: string, owner: string): void {
  const address = parseAddress(value);
  if (address && !list.some((u) => sameAddress(u.address, address) && u.owner === owner)) list.push({ address, owner });
}

/** True for the platform endpoint Services (they hold the VIPs by design). */
export function isPlatformEndpoint(service: V1Service): boolean {
  return service.metadata?.annotations?.['tenantry.io/backend-source'] !== undefined;
}

/**
 * Reads what occupies the external subnet. A Kube-OVN type that is not served is skipped (noted); any other
 * failure means the cluster cannot be read.
 */
export async function readNetwork(
  kube: BootstrapKube,
  options: { subnetName: string; cidr?: Cidr; services: V1Service[]; northboundListing?: string },
): Promise<NetworkFacts> {
  const list = async (plural: string) => {
    try {
      return await kube.listClusterCustom(GROUP, VERSION, plural);
    } catch (error) {
      throw unreadable(`${plural}.${GROUP}`, error);
    }
  };
  const facts: NetworkFacts = { kubeOvn: false, routerPorts: [], projectAddresses: [], systemSnat: [], notes: [] };
  const inSubnet = (address: Address) => !options.cidr || inCidr(address, options.cidr);

  const subnets = await list('subnets');
  if (subnets) {
    facts.kubeOvn = true;
    const subnet = subnets.find((s) => nameOf(s) === options.subnetName);
    if (subnet) {
      const cidrText = text(subnet, 'spec.cidrBlock').split(',')[0] ?? '';
      const cidr = parseCidr(cidrText);
      const gateway = parseAddress(text(subnet, 'spec.gateway').split(',')[0] ?? '');
      const exclude = field(subnet, 'spec.excludeIps');
      facts.subnet = {
        name: options.subnetName,
        ...(cidr ? { cidr } : {}),
        ...(gateway ? { gateway } : {}),
        excludeIps: (Array.isArray(exclude) ? exclude : []).flatMap((entry) => {
          const range = parseRange(String(entry));
          return range ? [range] : [];
        }),
      };
    } else facts.notes.push(`Kube-OVN has no Subnet ${options.subnetName}: the live subnet was not compared`);
  }

  const eips = await list('ovn-eips');
  if (eips) {
    facts.kubeOvn = true;
    for (const eip of eips) {
      const name = nameOf(eip);
      const type = text(eip, 'spec.type', 'status.type') || 'nat';
      const value = text(eip, 'status.v4Ip', 'spec.v4Ip', 'status.v6Ip', 'spec.v6Ip');
      const address = parseAddress(value);
      if (!address || !inSubnet(address)) continue;
      if (type === 'lrp') {
        push(facts.routerPorts, value, `OvnEip ${name} (router port)`);
        if (name === `${MANAGEMENT_VPC}-${options.subnetName}`) facts.managementRouterPort = { address, owner: `OvnEip ${name}` };
      } else push(facts.projectAddresses, value, `OvnEip ${name} (${type})`);
    }
  }
  for (const port of parseNorthboundListing(options.northboundListing ?? '')) {
    if (!inSubnet(port.address)) continue;
    push(facts.routerPorts, port.address.toString(), `logical router port ${port.name}`);
    if (port.name === `${MANAGEMENT_VPC}-${options.subnetName}` && !facts.managementRouterPort)
      facts.managementRouterPort = { address: port.address, owner: `logical router port ${port.name}` };
  }
  if (facts.managementRouterPort) facts.systemSnat.push(facts.managementRouterPort);
  else if (facts.kubeOvn || options.northboundListing)
    facts.notes.push(`no management router port ${MANAGEMENT_VPC}-${options.subnetName} was found: its address was not checked`);

  const snats = await list('ovn-snat-rules');
  for (const rule of snats ?? []) {
    const value = text(rule, 'status.v4Eip', 'status.v6Eip');
    const address = parseAddress(value);
    if (!address || !inSubnet(address)) continue;
    const vpc = text(rule, 'status.vpc', 'spec.vpc');
    if (vpc === MANAGEMENT_VPC) push(facts.systemSnat, value, `OvnSnatRule ${nameOf(rule)} (${MANAGEMENT_VPC})`);
    else push(facts.projectAddresses, value, `OvnSnatRule ${nameOf(rule)}${vpc ? ` (${vpc})` : ''}`);
  }
  for (const [plural, kind] of [
    ['ovn-fips', 'OvnFip'],
    ['ovn-dnat-rules', 'OvnDnatRule'],
  ] as const) {
    for (const rule of (await list(plural)) ?? []) {
      const value = text(rule, 'status.v4Eip', 'status.v6Eip');
      const address = parseAddress(value);
      if (address && inSubnet(address)) push(facts.projectAddresses, value, `${kind} ${nameOf(rule)}`);
    }
  }
  for (const eip of (await list('iptables-eips')) ?? []) {
    const value = text(eip, 'status.ip', 'spec.v4ip');
    const address = parseAddress(value);
    if (address && inSubnet(address)) push(facts.projectAddresses, value, `IptablesEIP ${nameOf(eip)}`);
  }
  for (const ip of (await list('ips')) ?? []) {
    if (text(ip, 'spec.subnet') !== options.subnetName) continue;
    const value = text(ip, 'spec.v4IpAddress', 'spec.ipAddress');
    const address = parseAddress(value);
    const known =
      address && [...facts.routerPorts, ...facts.systemSnat, ...facts.projectAddresses].some((u) => sameAddress(u.address, address));
    if (address && !known) push(facts.projectAddresses, value, `IP ${nameOf(ip)}`);
  }
  for (const service of options.services) {
    if (isPlatformEndpoint(service)) continue;
    const owner = `Service ${service.metadata?.namespace}/${service.metadata?.name}`;
    const values = [
      ...(service.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? ''),
      service.spec?.loadBalancerIP ?? '',
      ...(service.spec?.externalIPs ?? []),
    ];
    for (const value of values) {
      const address = parseAddress(value);
      if (address && inSubnet(address)) push(facts.projectAddresses, value, owner);
    }
  }
  if (!facts.kubeOvn && !options.northboundListing)
    facts.notes.push('no Kube-OVN resources (kubeovn.io) are served: router-port and project-address checks saw only Services');
  return facts;
}
