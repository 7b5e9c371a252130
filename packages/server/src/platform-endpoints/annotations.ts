/**
 * The Service annotations the chart writes and the manager reads (platform-deployment.md, "Service
 * annotations"), parsed into one endpoint's settings. Defaults are the seed's "Limits" row.
 */
export const ANNOTATION_PREFIX = 'tenantry.io';
export const BACKEND_SOURCE = `${ANNOTATION_PREFIX}/backend-source`;
export const NODE_CONTROL_PLANE = 'node-control-plane';

const A = {
  nodeSelector: `${ANNOTATION_PREFIX}/backend-node-selector`,
  addressType: `${ANNOTATION_PREFIX}/backend-address-type`,
  scheme: `${ANNOTATION_PREFIX}/health-scheme`,
  path: `${ANNOTATION_PREFIX}/health-path`,
  port: `${ANNOTATION_PREFIX}/health-port`,
  host: `${ANNOTATION_PREFIX}/health-host`,
  interval: `${ANNOTATION_PREFIX}/health-interval-seconds`,
  timeout: `${ANNOTATION_PREFIX}/health-timeout-seconds`,
  failureThreshold: `${ANNOTATION_PREFIX}/health-failure-threshold`,
  successThreshold: `${ANNOTATION_PREFIX}/health-success-threshold`,
  insecureSkipVerify: `${ANNOTATION_PREFIX}/health-insecure-skip-verify`,
  statusMax: `${ANNOTATION_PREFIX}/health-status-max`,
} as const;

export const DEFAULT_NODE_SELECTOR = 'node-role.kubernetes.io/control-plane=';

export interface EndpointSettings {
  /** Label requirements a backend node must meet; an empty value means "the label exists". */
  nodeSelector: Array<{ key: string; value: string }>;
  addressType: string;
  health: {
    scheme: 'https' | 'http';
    path: string;
    port: number;
    /** SNI and Host header; undefined probes the bare IP with no SNI. */
    host: string | undefined;
    intervalMs: number;
    timeoutMs: number;
    failureThreshold: number;
    successThreshold: number;
    insecureSkipVerify: boolean;
    /** Highest status that counts as healthy. */
    statusMax: number;
  };
}

export class SettingsError extends Error {}

export function isManaged(annotations: Record<string, string> | undefined): boolean {
  return annotations?.[BACKEND_SOURCE] === NODE_CONTROL_PLANE;
}

function integer(annotations: Record<string, string>, key: string, fallback: number, min: number, max: number): number {
  const raw = annotations[key];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new SettingsError(`${key} must be a whole number, got "${raw}"`);
  const value = Number(raw.trim());
  if (value < min || value > max) throw new SettingsError(`${key} must be between ${min} and ${max}, got ${value}`);
  return value;
}

/** Parses `key=value,key2=` (an empty value means the label only has to exist, whatever its value). */
export function parseNodeSelector(text: string): Array<{ key: string; value: string }> {
  const terms = text
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  if (terms.length === 0) throw new SettingsError(`${A.nodeSelector} must name at least one label`);
  return terms.map((term) => {
    const [key, value = '', ...rest] = term.split('=');
    if (!key || rest.length > 0 || !/^[A-Za-z0-9][-A-Za-z0-9_./]*$/.test(key))
      throw new SettingsError(`${A.nodeSelector}: cannot read "${term}"`);
    return { key, value };
  });
}

export function matchesNodeSelector(labels: Record<string, string> | undefined, selector: EndpointSettings['nodeSelector']): boolean {
  return selector.every(({ key, value }) => labels !== undefined && Object.hasOwn(labels, key) && (value === '' || labels[key] === value));
}

/** Reads an annotated Service's settings; throws SettingsError naming the annotation at fault. */
export function parseSettings(annotations: Record<string, string>): EndpointSettings {
  const scheme = (annotations[A.scheme] ?? 'https').trim() || 'https';
  if (scheme !== 'https' && scheme !== 'http') throw new SettingsError(`${A.scheme} must be https or http, got "${scheme}"`);
  const path = (annotations[A.path] ?? '/readyz').trim() || '/readyz';
  if (!path.startsWith('/')) throw new SettingsError(`${A.path} must start with /, got "${path}"`);
  const host = annotations[A.host]?.trim() || undefined;
  if (host !== undefined && !/^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$/.test(host))
    throw new SettingsError(`${A.host} must be a hostname, got "${host}"`);
  const insecure = (annotations[A.insecureSkipVerify] ?? 'true').trim().toLowerCase();
  if (insecure !== 'true' && insecure !== 'false')
    throw new SettingsError(`${A.insecureSkipVerify} must be true or false, got "${insecure}"`);
  const intervalS = integer(annotations, A.interval, 5, 1, 3600);
  const timeoutS = integer(annotations, A.timeout, 2, 1, 600);
  if (timeoutS > intervalS) throw new SettingsError(`${A.timeout} (${timeoutS}) must not exceed ${A.interval} (${intervalS})`);
  return {
    nodeSelector: parseNodeSelector(annotations[A.nodeSelector] ?? DEFAULT_NODE_SELECTOR),
    addressType: (annotations[A.addressType] ?? 'InternalIP').trim() || 'InternalIP',
    health: {
      scheme,
      path,
      port: integer(annotations, A.port, scheme === 'https' ? 443 : 80, 1, 65535),
      host,
      intervalMs: intervalS * 1000,
      timeoutMs: timeoutS * 1000,
      failureThreshold: integer(annotations, A.failureThreshold, 2, 1, 100),
      successThreshold: integer(annotations, A.successThreshold, 1, 1, 100),
      insecureSkipVerify: insecure === 'true',
      // "Not set" in the seed's table means any non-5xx is healthy: 499.
      statusMax: integer(annotations, A.statusMax, 499, 100, 599),
    },
  };
}
