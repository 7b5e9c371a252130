import type { ChartValues } from '../chart-values.ts';
import { type ClusterConfig, KEYS, type Problem } from '../cluster-config.ts';
import type { HostsEntry } from './corefile.ts';

interface HostsPlan {
  entries: HostsEntry[];
  /** Every platform hostname the values name (taken out before the entries go in, and by `remove`). */
  platformNames: string[];
  vips: string[];
  problems: Problem[];
  notes: string[];
}

/** The gateway's hostnames in the seed's order, then the configured extras. */
function gatewayNames(values: ChartValues): Array<[string, string]> {
  const h = values.hostnames;
  return [
    ['platform.hostnames.login', h.login],
    ['platform.hostnames.backend', h.backend],
    ['platform.hostnames.console', h.console],
    ['platform.hostnames.billing', h.billing],
    ['platform.hostnames.s3', h.s3],
    ...h.extra.map((name, i): [string, string] => [`platform.hostnames.extra[${i}]`, name]),
  ];
}

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * The hosts entries of platform-deployment.md ("Per-project resolver"): the cluster API VIP for the cluster
 * API hostname, the gateway VIP for the login, backend, console, billing and object-storage hostnames and
 * the extras; only for endpoints whose switch is on. VIPs come from the cluster configuration, hostnames
 * from the chart values.
 */
export function planHosts(config: ClusterConfig, values: ChartValues, mode: 'apply' | 'remove'): HostsPlan {
  const problems: Problem[] = [];
  const notes: string[] = [];
  const kubeName = values.hostnames.kubeAPI.toLowerCase();
  const gateway = gatewayNames(values).map(([field, name]) => [field, name.toLowerCase()] as const);
  for (const [field, name] of [['platform.hostnames.kubeAPI', kubeName] as const, ...gateway])
    if (name !== '' && !HOSTNAME.test(name)) problems.push({ field, message: `"${name}" is not a hostname` });
  const platformNames = [...new Set([kubeName, ...gateway.map(([, name]) => name)].filter((n) => n !== ''))];
  const vips = [config.kubeApi.vip, config.edgeGateway.vip].flatMap((v) => (v ? [v.toString()] : []));
  const entries: HostsEntry[] = [];
  if (mode === 'apply') {
    if (!config.kubeApi.enabled && !config.edgeGateway.enabled)
      problems.push({
        field: `${KEYS.kubeApiEnabled}, ${KEYS.edgeGatewayEnabled}`,
        message: `both are false in ${config.source}: nothing to map (to take the names out, use tenantry bootstrap resolvers remove)`,
      });
    if (config.kubeApi.enabled) {
      if (!config.kubeApi.vip)
        problems.push({ field: KEYS.kubeApiVip, message: `is empty in ${config.source} while the cluster API endpoint is on` });
      if (kubeName === '')
        problems.push({ field: 'platform.hostnames.kubeAPI', message: 'is empty in the values: the cluster API hostname is needed' });
      if (config.kubeApi.vip && kubeName !== '') entries.push({ address: config.kubeApi.vip.toString(), names: [kubeName] });
    }
    if (config.edgeGateway.enabled) {
      if (!config.edgeGateway.vip)
        problems.push({ field: KEYS.edgeGatewayVip, message: `is empty in ${config.source} while the edge gateway endpoint is on` });
      const names = [...new Set(gateway.map(([, name]) => name).filter((n) => n !== ''))];
      for (const [field, name] of gateway.slice(0, 5)) if (name === '') notes.push(`${field} is not set: no entry for it`);
      if (names.length === 0)
        problems.push({ field: 'platform.hostnames', message: 'names no gateway hostname (login, backend, console, billing, s3)' });
      if (kubeName !== '' && names.includes(kubeName))
        problems.push({
          field: 'platform.hostnames.kubeAPI',
          message: `"${kubeName}" is also a gateway hostname; it can map to one VIP only`,
        });
      if (config.edgeGateway.vip && names.length > 0) entries.push({ address: config.edgeGateway.vip.toString(), names });
    }
  } else if (platformNames.length === 0) problems.push({ field: 'platform.hostnames', message: 'names no hostname: nothing to take out' });
  return { entries, platformNames, vips, problems, notes };
}
