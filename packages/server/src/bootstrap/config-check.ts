import type { V1Service } from '@kubernetes/client-node';
import { renderViolations } from './anchors/commands.ts';
import type { Violation } from './anchors/validate.ts';
import { externalSubnet, validateAnchors } from './anchors/validate.ts';
import type { ChartValues } from './chart-values.ts';
import { type ClusterConfig, KEYS, type Problem } from './cluster-config.ts';
import { type ConfigOptions, loadClusterConfig, loadValues, readOptionalFile } from './inputs.ts';
import { type Address, type AddressRange, type Cidr, inCidr, inRange, parseAddress, sameAddress, subnetBounds } from './ip.ts';
import { type BootstrapKube, unreadable } from './kube.ts';
import { type NetworkFacts, readNetwork } from './network.ts';
import { EXIT, type ExitCode, type Io, json } from './output.ts';
import { type NodeFacts, nodeFacts } from './topology/facts.ts';

interface ConfigCheckInputs {
  config: ClusterConfig;
  problems: Problem[];
  network: NetworkFacts;
  /** The chart values, when `--values` was given. */
  values?: ChartValues;
  services: V1Service[];
  nodes: NodeFacts[];
}

const ENDPOINTS = [
  { key: 'kubeApi', values: 'kubeAPI', enabled: KEYS.kubeApiEnabled, vip: KEYS.kubeApiVip },
  { key: 'edgeGateway', values: 'edgeGateway', enabled: KEYS.edgeGatewayEnabled, vip: KEYS.edgeGatewayVip },
] as const;

function excluded(address: Address, ranges: AddressRange[]): boolean {
  return ranges.some((range) => inRange(address, range));
}

function allowed(address: Address, list: Cidr[]): boolean {
  return list.some((entry) => inCidr(address, entry));
}

/**
 * The cluster configuration rules of platform-deployment.md ("Cluster configuration fields"), the enabling
 * steps 1 to 4 in order: VIPs in the external subnet, unused, excluded from the address manager, in both
 * allowlists with the system SNAT IPs; switches and VIPs as the chart has them. Pure: every violation.
 */
export function checkConfig(inputs: ConfigCheckInputs): { violations: Violation[]; notes: string[] } {
  const { config, network } = inputs;
  const violations: Violation[] = inputs.problems.map((p) => ({ rule: 'readable', subject: p.field, message: p.message }));
  const notes = [...network.notes];
  const add = (rule: string, subject: string, message: string) => violations.push({ rule, subject, message });
  const subnet = externalSubnet(config, network);
  if (!subnet) add('external-subnet', KEYS.externalCidr, `the external subnet is unknown: set ${KEYS.externalCidr}`);
  if (config.externalCidr && network.subnet?.cidr && config.externalCidr.text !== network.subnet.cidr.text)
    add(
      'external-subnet',
      KEYS.externalCidr,
      `${config.externalCidr.text} differs from the live Subnet ${network.subnet.name} (${network.subnet.cidr.text})`,
    );

  const vips: Array<{ field: string; address: Address }> = [];
  for (const endpoint of ENDPOINTS) {
    const { enabled, vip } = config[endpoint.key];
    if (enabled && !vip) add('vip-set', endpoint.vip, `is empty while ${endpoint.enabled} is true`);
    if (vip) vips.push({ field: endpoint.vip, address: vip });
  }
  const [first, second] = vips;
  if (first && second && sameAddress(first.address, second.address))
    add('vips-distinct', second.field, `equals ${first.field} (${first.address}); each endpoint needs its own`);

  const management = network.managementRouterPort;
  const taken = [...network.projectAddresses, ...network.systemSnat, ...network.routerPorts];
  for (const { field, address } of vips) {
    const ip = address.toString();
    if (subnet) {
      if (!inCidr(address, subnet)) add('vip-in-external-subnet', field, `${ip} is outside the external subnet ${subnet.text}`);
      else {
        const bounds = subnetBounds(subnet);
        if (sameAddress(address, bounds.network) || (address.kind() === 'ipv4' && sameAddress(address, bounds.broadcast)))
          add('vip-in-external-subnet', field, `${ip} is the subnet's network or broadcast address`);
      }
    }
    const gateway = config.externalGateway ?? network.subnet?.gateway;
    if (gateway && sameAddress(address, gateway)) add('vip-unused', field, `${ip} is the external subnet's gateway`);
    if (management && sameAddress(address, management.address))
      add('vip-unused', field, `${ip} is the management router port's address (${management.owner})`);
    const owners = new Set(
      taken
        .filter((u) => sameAddress(u.address, address) && !(management && sameAddress(u.address, management.address)))
        .map((u) => u.owner),
    );
    for (const owner of owners) add('vip-unused', field, `${ip} is in use by ${owner}`);
    for (const anchor of config.anchors)
      if (sameAddress(anchor.address, address)) add('vip-unused', field, `${ip} is the anchor of ${anchor.node}`);
    if (!excluded(address, config.excludeIps))
      add('vip-excluded', field, `${ip} is not in ${KEYS.excludeIps}: the address manager may hand it to a project`);
    else if (network.subnet && !excluded(address, network.subnet.excludeIps))
      add(
        'vip-excluded',
        field,
        `${ip} is in ${KEYS.excludeIps} but the live Subnet ${network.subnet.name} does not exclude it (configuration not applied?)`,
      );
    if (!allowed(address, config.ingressAllowlist)) add('vip-in-allowlists', field, `${ip} is not in ${KEYS.ingressAllowlist}`);
    if (!allowed(address, config.egressAllowlist)) add('vip-in-allowlists', field, `${ip} is not in ${KEYS.egressAllowlist}`);
  }

  const snat = [
    ...config.systemSnatIps.map((address) => ({ address, owner: KEYS.systemSnatIps })),
    ...network.systemSnat.filter((s) => !config.systemSnatIps.some((a) => sameAddress(a, s.address))),
  ];
  for (const { address, owner } of snat) {
    if (!allowed(address, config.ingressAllowlist))
      add('system-snat-in-allowlists', address.toString(), `${owner}: not in ${KEYS.ingressAllowlist}`);
    if (!allowed(address, config.egressAllowlist))
      add('system-snat-in-allowlists', address.toString(), `${owner}: not in ${KEYS.egressAllowlist}`);
  }

  const values = inputs.values;
  if (!values) notes.push('no --values given: the switches and VIPs were not compared with the chart values or its Services');
  // A field that could not be read is reported once, as unreadable, not again as inconsistent.
  const unreadable = new Set(inputs.problems.map((p) => p.field));
  for (const endpoint of ENDPOINTS) {
    if (!values) break;
    const own = config[endpoint.key];
    const chart = values[endpoint.values];
    const base = `platformEndpoints.${endpoint.values}`;
    const switchKnown = !unreadable.has(endpoint.enabled);
    const vipKnown = !unreadable.has(endpoint.vip);
    if (switchKnown && chart.enabled !== own.enabled)
      add(
        'chart-consistent',
        endpoint.enabled,
        `is ${own.enabled} but ${base}.enabled is ${chart.enabled} in ${values.sources.join(', ')}`,
      );
    const chartVip = chart.vip === '' ? undefined : parseAddress(chart.vip);
    if (chart.vip !== '' && !chartVip) add('chart-consistent', `${base}.vip`, `"${chart.vip}" is not an IP address`);
    else if (vipKnown && (own.vip?.toString() ?? '') !== (chartVip?.toString() ?? '') && (own.vip || chartVip))
      add('chart-consistent', endpoint.vip, `is ${own.vip ?? 'empty'} but ${base}.vip is ${chart.vip || 'empty'}`);
    // The deployed chart: its Service exists exactly when the switch is on, and asks for the VIP.
    const { name, namespace } = values[endpoint.values];
    const service = inputs.services.find((s) => s.metadata?.name === name && s.metadata?.namespace === namespace);
    if (switchKnown && own.enabled && !service)
      add('chart-deployed', endpoint.enabled, `is true but the Service ${namespace}/${name} does not exist (enabling step 4 not done?)`);
    if (switchKnown && !own.enabled && service)
      add('chart-deployed', endpoint.enabled, `is false but the Service ${namespace}/${name} still exists`);
    const asked = service?.spec?.loadBalancerIP;
    if (vipKnown && own.vip && asked && asked !== own.vip.toString())
      add('chart-deployed', endpoint.vip, `is ${own.vip} but the Service ${namespace}/${name} asks for ${asked}`);
  }

  // The anchor rules (2 and 3) are part of the configuration too, once anchors are configured or an endpoint is on.
  if (config.anchors.length > 0 || config.kubeApi.enabled || config.edgeGateway.enabled) {
    const anchors = validateAnchors({ config, problems: [], nodes: inputs.nodes, network });
    // The unknown subnet is already reported above.
    for (const v of anchors.violations) if (v.rule !== 'external-subnet') violations.push({ ...v, rule: `anchor-${v.rule}` });
  } else notes.push(`${KEYS.anchors} is empty and both endpoints are off: the anchor rules were not checked`);
  return { violations, notes };
}

interface ConfigCheckOptions extends ConfigOptions {
  json?: boolean;
  values: string[];
  northboundListing?: string;
}

/** `tenantry bootstrap config check`: one line per violation; 0 none, 1 any, 2 unreadable input, 3 unreadable cluster. */
export async function configCheck(kube: BootstrapKube, options: ConfigCheckOptions, io: Io): Promise<ExitCode> {
  const values = options.values.length > 0 ? await loadValues(options.values) : undefined;
  const loaded = await loadClusterConfig(options, kube);
  if (!loaded) throw new Error('unreachable: a required configuration is never undefined');
  const listing = await readOptionalFile(options.northboundListing, 'the northbound listing');
  let services: V1Service[];
  let nodes: NodeFacts[];
  try {
    services = await kube.listServices();
  } catch (error) {
    throw unreadable('services', error);
  }
  try {
    nodes = (await kube.listNodes()).map(nodeFacts);
  } catch (error) {
    throw unreadable('nodes', error);
  }
  const network = await readNetwork(kube, {
    subnetName: loaded.config.externalSubnetName,
    ...(loaded.config.externalCidr ? { cidr: loaded.config.externalCidr } : {}),
    services,
    ...(listing !== undefined ? { northboundListing: listing } : {}),
  });
  const { violations, notes } = checkConfig({
    config: loaded.config,
    problems: loaded.problems,
    network,
    services,
    nodes,
    ...(values ? { values } : {}),
  });
  for (const note of notes) io.err(`note: ${note}\n`);
  if (options.json) io.out(json({ source: loaded.config.source, violations }));
  else io.out(violations.length > 0 ? renderViolations(violations) : `${loaded.config.source}: every rule passes\n`);
  return violations.length > 0 ? EXIT.findings : EXIT.ok;
}
