import { parseEnv } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { type Address, type AddressRange, type Cidr, parseAddress, parseCidr, parseRange } from './ip.ts';

/**
 * The cluster configuration fields of platform-deployment.md ("Cluster configuration fields"), plus the few
 * the checks need to know the external network. The same keys live in the operator's
 * configuration file (`cluster-config.env`) and in the cluster configuration ConfigMap.
 */
export const KEYS = {
  excludeIps: 'EXT_NET_EXCLUDE_IPS',
  ingressAllowlist: 'INGRESS_GLOBAL_ALLOWLIST',
  egressAllowlist: 'EGRESS_GLOBAL_ALLOWLIST',
  kubeApiEnabled: 'PLATFORM_ENDPOINT_KUBE_API_ENABLED',
  kubeApiVip: 'KUBE_API_INTERNAL_VIP',
  edgeGatewayEnabled: 'PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED',
  edgeGatewayVip: 'EDGE_GATEWAY_INTERNAL_VIP',
  anchors: 'EXT_NET_ANCHOR_IPS',
  addressLayer: 'INGRESS_ADDRESS_LAYER',
  externalSubnetName: 'EXT_NET_NAME',
  externalCidr: 'EXT_NET_CIDR',
  externalGateway: 'EXT_NET_GATEWAY',
  anchorInterface: 'EXT_NET_ANCHOR_INTERFACE',
  systemSnatIps: 'SYSTEM_SNAT_IPS',
} as const;

const ADDRESS_LAYERS = ['none', 'lb-l2', 'lb-bgp'] as const;
type AddressLayer = (typeof ADDRESS_LAYERS)[number];

interface Anchor {
  node: string;
  address: Address;
  /** The prefix length when the pair was written `<node>=<ip>/<prefix>`. */
  prefix?: number;
  /** The pair as written. */
  text: string;
}

export interface Endpoint {
  enabled: boolean;
  vip?: Address;
}

export interface ClusterConfig {
  /** Where it was read from, for messages: `ConfigMap flux-system/cluster-config` or `file cluster-config.env`. */
  source: string;
  raw: Record<string, string>;
  externalSubnetName: string;
  externalCidr?: Cidr;
  externalGateway?: Address;
  excludeIps: AddressRange[];
  /** Allowlist entries are subnets; a bare address is a /32 (or /128). */
  ingressAllowlist: Cidr[];
  egressAllowlist: Cidr[];
  kubeApi: Endpoint;
  edgeGateway: Endpoint;
  anchors: Anchor[];
  anchorInterface: string;
  addressLayer?: AddressLayer;
  systemSnatIps: Address[];
}

/** One thing wrong with an input, reported on its own line. */
export interface Problem {
  field: string;
  message: string;
}

/** Reads the env-file form (`KEY=value`, `#` comments, quotes) or a ConfigMap manifest (YAML or JSON). */
export function parseConfigText(text: string): Record<string, string> {
  if (/^\s*(apiVersion|kind|metadata|data)\s*:/m.test(text) || text.trimStart().startsWith('{')) {
    const document = parseYaml(text) as { kind?: unknown; data?: unknown } | null;
    if (document && typeof document === 'object' && document.data && typeof document.data === 'object')
      return Object.fromEntries(Object.entries(document.data as Record<string, unknown>).map(([k, v]) => [k, String(v ?? '')]));
    throw new Error('the file looks like a manifest but has no `data` map (expected a ConfigMap)');
  }
  return parseEnv(text) as Record<string, string>;
}

function list(text: string): string[] {
  const value = text.trim();
  if (value === '') return [];
  if (value.startsWith('[')) {
    try {
      const parsed = JSON.parse(value) as unknown;
      if (Array.isArray(parsed)) return parsed.map((item) => String(item).trim()).filter((item) => item !== '');
    } catch {
      // `[a, b]` without quotes: read it as a plain list below.
    }
    return value
      .replace(/^\[|\]$/g, '')
      .split(/[\s,]+/)
      .map((item) => item.replace(/^["']|["']$/g, ''))
      .filter((item) => item !== '');
  }
  return value.split(/[\s,]+/).filter((item) => item !== '');
}

function asSubnet(entry: string): Cidr | undefined {
  if (entry.includes('/')) return parseCidr(entry);
  const address = parseAddress(entry);
  return address ? { address, prefix: address.kind() === 'ipv4' ? 32 : 128, text: address.toString() } : undefined;
}

const NODE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Parses every field it knows; each unreadable value is a Problem and is left out of the result. */
export function parseClusterConfig(raw: Record<string, string>, source: string): { config: ClusterConfig; problems: Problem[] } {
  const problems: Problem[] = [];
  const get = (key: string) => (raw[key] ?? '').trim();
  const address = (key: string): Address | undefined => {
    const text = get(key);
    if (text === '') return undefined;
    const parsed = parseAddress(text);
    if (!parsed) problems.push({ field: key, message: `"${text}" is not an IP address` });
    return parsed;
  };
  const bool = (key: string): boolean => {
    const text = get(key).toLowerCase();
    if (text === '' || text === 'false') return false;
    if (text === 'true') return true;
    problems.push({ field: key, message: `"${get(key)}" is not true or false` });
    return false;
  };
  const allowlist = (key: string): Cidr[] =>
    list(get(key)).flatMap((entry) => {
      const subnet = asSubnet(entry);
      if (!subnet) problems.push({ field: key, message: `"${entry}" is not an address or a subnet` });
      return subnet ? [subnet] : [];
    });

  let externalCidr: Cidr | undefined;
  if (get(KEYS.externalCidr) !== '') {
    externalCidr = parseCidr(get(KEYS.externalCidr));
    if (!externalCidr) problems.push({ field: KEYS.externalCidr, message: `"${get(KEYS.externalCidr)}" is not a subnet (a.b.c.d/n)` });
  }
  const excludeIps = list(get(KEYS.excludeIps)).flatMap((entry) => {
    const range = parseRange(entry);
    if (!range) problems.push({ field: KEYS.excludeIps, message: `"${entry}" is not an address or a range a..b` });
    return range ? [range] : [];
  });
  const anchors: Anchor[] = [];
  for (const pair of get(KEYS.anchors)
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '')) {
    const [node, value, extra] = pair.split('=').map((part) => part.trim());
    if (!node || !value || extra !== undefined) {
      problems.push({ field: KEYS.anchors, message: `"${pair}" is not a <node>=<ip> pair` });
      continue;
    }
    if (!NODE_NAME.test(node)) {
      problems.push({ field: KEYS.anchors, message: `"${node}" is not a node name` });
      continue;
    }
    const cidr = value.includes('/') ? parseCidr(value) : undefined;
    const parsed = cidr?.address ?? (value.includes('/') ? undefined : parseAddress(value));
    if (!parsed) {
      problems.push({ field: KEYS.anchors, message: `"${pair}": "${value}" is not an IP address (or address/prefix)` });
      continue;
    }
    anchors.push({ node, address: parsed, ...(cidr ? { prefix: cidr.prefix } : {}), text: pair });
  }
  let addressLayer: AddressLayer | undefined;
  if (get(KEYS.addressLayer) !== '') {
    const layer = get(KEYS.addressLayer);
    if ((ADDRESS_LAYERS as readonly string[]).includes(layer)) addressLayer = layer as AddressLayer;
    else problems.push({ field: KEYS.addressLayer, message: `"${layer}" is not one of ${ADDRESS_LAYERS.join(', ')}` });
  }
  const systemSnatIps = list(get(KEYS.systemSnatIps)).flatMap((entry) => {
    const parsed = parseAddress(entry);
    if (!parsed) problems.push({ field: KEYS.systemSnatIps, message: `"${entry}" is not an IP address` });
    return parsed ? [parsed] : [];
  });
  const externalGateway = address(KEYS.externalGateway);
  const kubeApiVip = address(KEYS.kubeApiVip);
  const edgeGatewayVip = address(KEYS.edgeGatewayVip);
  const config: ClusterConfig = {
    source,
    raw,
    externalSubnetName: get(KEYS.externalSubnetName) || 'ext-cloud',
    ...(externalCidr ? { externalCidr } : {}),
    ...(externalGateway ? { externalGateway } : {}),
    excludeIps,
    ingressAllowlist: allowlist(KEYS.ingressAllowlist),
    egressAllowlist: allowlist(KEYS.egressAllowlist),
    kubeApi: { enabled: bool(KEYS.kubeApiEnabled), ...(kubeApiVip ? { vip: kubeApiVip } : {}) },
    edgeGateway: { enabled: bool(KEYS.edgeGatewayEnabled), ...(edgeGatewayVip ? { vip: edgeGatewayVip } : {}) },
    anchors,
    anchorInterface: get(KEYS.anchorInterface) || 'br-ext-cloud',
    ...(addressLayer ? { addressLayer } : {}),
    systemSnatIps,
  };
  return { config, problems };
}
