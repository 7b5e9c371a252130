import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';

/**
 * The chart values the bootstrap commands read (`--values`, as helm takes them: several files, later ones
 * win, maps merge). Defaults are those of charts/tenantry/values.yaml; a test holds them equal.
 */
interface EndpointValues {
  enabled: boolean;
  vip: string;
  name: string;
  namespace: string;
  interface: string;
  loadBalancerClass: string;
}

export interface ChartValues {
  sources: string[];
  hostnames: {
    kubeAPI: string;
    console: string;
    login: string;
    backend: string;
    billing: string;
    s3: string;
    /** Other hostnames served through the edge gateway (the resolver maps them to its VIP too). */
    extra: string[];
  };
  kubeAPI: EndpointValues;
  edgeGateway: EndpointValues;
}

export const CHART_DEFAULTS: Omit<ChartValues, 'sources'> = {
  hostnames: { kubeAPI: '', console: '', login: '', backend: '', billing: '', s3: '', extra: [] },
  kubeAPI: {
    enabled: false,
    vip: '',
    name: 'kube-api-platform',
    namespace: 'kube-system',
    interface: 'br-ext-cloud',
    loadBalancerClass: 'metallb.io/l2',
  },
  edgeGateway: {
    enabled: false,
    vip: '',
    name: 'edge-gateway-platform',
    namespace: 'envoy-gateway-system',
    interface: 'br-ext-cloud',
    loadBalancerClass: 'metallb.io/l2',
  },
};

type Tree = Record<string, unknown>;

function isTree(value: unknown): value is Tree {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function merge(base: Tree, over: Tree): Tree {
  const out: Tree = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    out[key] = isTree(current) && isTree(value) ? merge(current, value) : value;
  }
  return out;
}

function at(tree: Tree, path: string): unknown {
  return path.split('.').reduce<unknown>((node, key) => (isTree(node) ? node[key] : undefined), tree);
}

export class ValuesError extends Error {}

/** Reads and merges the files; an unreadable file or a field of the wrong type is a ValuesError. */
export async function loadChartValues(files: string[]): Promise<ChartValues> {
  let tree: Tree = {};
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      throw new ValuesError(`cannot read the values file ${file}: ${(error as Error).message}`);
    }
    let document: unknown;
    try {
      document = parseYaml(text);
    } catch (error) {
      throw new ValuesError(`the values file ${file} is not YAML: ${(error as Error).message.split('\n')[0]}`);
    }
    if (document === null || document === undefined) continue;
    if (!isTree(document)) throw new ValuesError(`the values file ${file} is not a map of values`);
    tree = merge(tree, document);
  }
  return valuesFromTree(tree, files);
}

export function valuesFromTree(tree: Tree, sources: string[]): ChartValues {
  const text = (path: string, fallback: string): string => {
    const value = at(tree, path);
    if (value === undefined || value === null) return fallback;
    if (typeof value !== 'string') throw new ValuesError(`${path} must be a string, got ${JSON.stringify(value)}`);
    return value.trim();
  };
  const flag = (path: string, fallback: boolean): boolean => {
    const value = at(tree, path);
    if (value === undefined || value === null) return fallback;
    if (typeof value !== 'boolean') throw new ValuesError(`${path} must be true or false, got ${JSON.stringify(value)}`);
    return value;
  };
  const endpoint = (key: 'kubeAPI' | 'edgeGateway'): EndpointValues => {
    const d = CHART_DEFAULTS[key];
    const base = `platformEndpoints.${key}`;
    return {
      enabled: flag(`${base}.enabled`, d.enabled),
      vip: text(`${base}.vip`, d.vip),
      name: text(`${base}.name`, d.name),
      namespace: text(`${base}.namespace`, d.namespace),
      interface: text(`${base}.interface`, d.interface),
      loadBalancerClass: text(`${base}.loadBalancerClass`, d.loadBalancerClass),
    };
  };
  const extra = at(tree, 'platform.hostnames.extra') ?? [];
  if (!Array.isArray(extra) || extra.some((item) => typeof item !== 'string'))
    throw new ValuesError(`platform.hostnames.extra must be a list of hostnames, got ${JSON.stringify(extra)}`);
  const h = CHART_DEFAULTS.hostnames;
  return {
    sources,
    hostnames: {
      kubeAPI: text('platform.hostnames.kubeAPI', h.kubeAPI),
      console: text('platform.hostnames.console', h.console),
      login: text('platform.hostnames.login', h.login),
      backend: text('platform.hostnames.backend', h.backend),
      billing: text('platform.hostnames.billing', h.billing),
      s3: text('platform.hostnames.s3', h.s3),
      extra: (extra as string[]).map((name) => name.trim()).filter((name) => name !== ''),
    },
    kubeAPI: endpoint('kubeAPI'),
    edgeGateway: endpoint('edgeGateway'),
  };
}
