import { readFile } from 'node:fs/promises';
import { type ChartValues, loadChartValues, ValuesError } from './chart-values.ts';
import { type ClusterConfig, type Problem, parseClusterConfig, parseConfigText } from './cluster-config.ts';
import { DEFAULT_CONFIGMAP } from './defaults.ts';
import { type BootstrapKube, unreadable } from './kube.ts';
import { BootstrapError, EXIT } from './output.ts';

export interface ConfigOptions {
  /** The operator's configuration file (`cluster-config.env`, or a ConfigMap manifest). */
  config?: string;
  /** `namespace/name` of the cluster configuration ConfigMap. */
  configmap?: string;
}

interface LoadedConfig {
  config: ClusterConfig;
  problems: Problem[];
}

export function splitRef(ref: string, flag: string): { namespace: string; name: string } {
  const match = /^([a-z0-9][-a-z0-9]*)\/([a-z0-9][-a-z0-9.]*)$/.exec(ref);
  if (!match?.[1] || !match[2]) throw new BootstrapError(`${flag} must be namespace/name, got "${ref}"`, EXIT.badInput);
  return { namespace: match[1], name: match[2] };
}

/**
 * The cluster configuration, from `--config FILE` or else the ConfigMap (`--configmap`, default
 * flux-system/cluster-config). `optional`: a missing ConfigMap is no configuration rather than an error.
 */
export async function loadClusterConfig(
  options: ConfigOptions,
  kube: BootstrapKube | undefined,
  mode: { optional?: boolean } = {},
): Promise<LoadedConfig | undefined> {
  if (options.config) {
    let raw: Record<string, string>;
    try {
      raw = parseConfigText(await readFile(options.config, 'utf8'));
    } catch (error) {
      throw new BootstrapError(`cannot read the configuration file ${options.config}: ${(error as Error).message}`, EXIT.badInput);
    }
    return parseClusterConfig(raw, `file ${options.config}`);
  }
  const ref = splitRef(options.configmap ?? DEFAULT_CONFIGMAP, '--configmap');
  if (!kube) throw new BootstrapError('give --config FILE (no cluster to read the configuration ConfigMap from)', EXIT.badInput);
  let configMap: Awaited<ReturnType<BootstrapKube['getConfigMap']>>;
  try {
    configMap = await kube.getConfigMap(ref.namespace, ref.name);
  } catch (error) {
    throw unreadable(`the ConfigMap ${ref.namespace}/${ref.name}`, error);
  }
  if (!configMap) {
    if (mode.optional) return undefined;
    throw new BootstrapError(
      `the cluster configuration ConfigMap ${ref.namespace}/${ref.name} does not exist; give --config FILE or --configmap NAMESPACE/NAME`,
      EXIT.badInput,
    );
  }
  return parseClusterConfig(configMap.data ?? {}, `ConfigMap ${ref.namespace}/${ref.name}`);
}

export async function loadValues(files: string[]): Promise<ChartValues> {
  try {
    return await loadChartValues(files);
  } catch (error) {
    if (error instanceof ValuesError) throw new BootstrapError(error.message, EXIT.badInput);
    throw error;
  }
}

export async function readOptionalFile(path: string | undefined, what: string): Promise<string | undefined> {
  if (!path) return undefined;
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new BootstrapError(`cannot read ${what} ${path}: ${(error as Error).message}`, EXIT.badInput);
  }
}
