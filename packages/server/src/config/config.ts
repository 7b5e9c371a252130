import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { ConfigError } from '../infra/errors/config-error.ts';
import { fallbackOf } from './settings.ts';

export { ConfigError };

/** Where the in-cluster service account's files are mounted (token, CA, namespace). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * What the configuration needs of a platform driver: the TENANTRY_PLATFORM value that selects it and how
 * it reads its own settings. The composition root passes the driver registry, so config imports no driver.
 */
export interface DriverSettings {
  readonly name: string;
  /** Throws a ConfigError naming the first bad variable (and the others after it). */
  readSettings(get: (name: string) => string | undefined): unknown;
}

/**
 * The server's configuration (CONTRACT §2): environment variables, overridden
 * by command-line flags. Every problem names its variable, so start-up can
 * stop with one line that says what to fix.
 */
export interface Config {
  databaseUrl: string | undefined;
  /** Statements each PostgreSQL connection keeps prepared. */
  databaseStatementCache: number;
  /** Connections to a PostgreSQL server a process opens at most. */
  databasePoolSize: number;
  dataDir: string;
  listen: HostPort;
  operatorListen: HostPort;
  publicUrl: string;
  /** false when TENANTRY_PUBLIC_URL was not set: the server then uses the address it actually listens on. */
  publicUrlConfigured: boolean;
  operatorToken: string | undefined;
  /** The platform driver's name (TENANTRY_PLATFORM), one of the registry's. */
  platform: string;
  /** `--watch-partners`: read partners from Kube-DC Partner resources, through this kubeconfig (undefined: in-cluster). */
  watchPartners: { kubeconfig: string | undefined; namespace: string | undefined } | undefined;
  /** The driver's own settings, as it read and checked them at start (the sandbox has none). */
  platformSettings: unknown;
  sandboxDelayMs: number;
  /** The sandbox's simulated network latency per call (slow-platform tests and measurements). */
  sandboxCallMs: number;
  osImagesFile: string | undefined;
  webhookCaFile: string | undefined;
  /** The PEM certificates of TENANTRY_WEBHOOK_CA_FILE, trusted for webhook HTTPS besides the system's. */
  webhookCa: string | undefined;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Proxies whose X-Forwarded-For is believed: false, a hop count, or addresses/CIDRs. */
  trustProxy: false | number | string[];
  /** How long a partner record is cached by the authenticated path; bounds how late a suspension is seen. */
  partnerCacheMs: number;
  /** Webhook deliveries in flight to one receiver across every process. */
  /** Operations this process works on at once; undefined: 8 on a PostgreSQL server, 1 embedded. */
  engineConcurrency: number | undefined;
  webhookConcurrency: number;
  /** The keys that seal secrets at rest (active first), when given in the environment. */
  secretKey: string | undefined;
  /** A file holding those keys (a mounted Secret), when given. */
  secretKeyFile: string | undefined;
  /** `serve --fix-permissions`: make the data directory owner-only instead of refusing to start. */
  fixPermissions: boolean;
  /** The bearer token `GET /metrics` asks for; undefined: it answers without one, as the health checks do. */
  metricsScrapeToken: string | undefined;
  /** Where spans are exported (OTLP over HTTP) and under which service name; undefined: no traces. */
  tracing: { endpoint: string; serviceName: string } | undefined;
}

export interface HostPort {
  host: string;
  port: number;
}

type Env = Record<string, string | undefined>;

export function loadConfig(drivers: readonly DriverSettings[], env: Env = process.env, overrides: Env = {}): Config {
  const get = (name: string): string | undefined => {
    const value = overrides[name] ?? env[name];
    return value === undefined || value === '' ? undefined : value;
  };

  const listen = parseHostPort('TENANTRY_LISTEN', get('TENANTRY_LISTEN') ?? fallbackOf('TENANTRY_LISTEN'));
  const operatorListen = parseHostPort(
    'TENANTRY_OPERATOR_LISTEN',
    get('TENANTRY_OPERATOR_LISTEN') ?? fallbackOf('TENANTRY_OPERATOR_LISTEN'),
  );
  if (listen.port !== 0 && listen.host === operatorListen.host && listen.port === operatorListen.port) {
    throw new ConfigError(
      'TENANTRY_OPERATOR_LISTEN',
      'must differ from TENANTRY_LISTEN: the operator API is never served with the partner API',
    );
  }

  const databaseUrl = get('TENANTRY_DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\/.+/.test(databaseUrl)) {
    throw new ConfigError('TENANTRY_DATABASE_URL', 'must be a postgres:// or postgresql:// URL');
  }

  const dataDirRaw = get('TENANTRY_DATA_DIR') ?? fallbackOf('TENANTRY_DATA_DIR');
  const dataDir = isAbsolute(dataDirRaw) ? dataDirRaw : resolve(dataDirRaw);

  const publicUrlRaw = get('TENANTRY_PUBLIC_URL') ?? `http://${formatHost(listen.host)}:${listen.port}`;
  let publicUrl: string;
  try {
    const url = new URL(publicUrlRaw);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
    publicUrl = url.toString().replace(/\/$/, '');
  } catch {
    throw new ConfigError('TENANTRY_PUBLIC_URL', `must be an http:// or https:// URL, got "${publicUrlRaw}"`);
  }

  const operatorToken = get('TENANTRY_OPERATOR_TOKEN');
  if (operatorToken !== undefined && operatorToken.length < 24) {
    throw new ConfigError('TENANTRY_OPERATOR_TOKEN', 'must be at least 24 characters');
  }

  const metricsScrapeToken = get('TENANTRY_METRICS_SCRAPE_TOKEN');
  if (metricsScrapeToken !== undefined && metricsScrapeToken.length < 24) {
    throw new ConfigError('TENANTRY_METRICS_SCRAPE_TOKEN', 'must be at least 24 characters');
  }
  const otelEndpoint = get('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (otelEndpoint !== undefined && !/^https?:\/\/[^/]/.test(otelEndpoint)) {
    throw new ConfigError(
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      `must be an http:// or https:// URL (the collector's OTLP/HTTP port), got "${otelEndpoint}"`,
    );
  }

  const platform = get('TENANTRY_PLATFORM') ?? fallbackOf('TENANTRY_PLATFORM');
  const driver = drivers.find((d) => d.name === platform);
  if (!driver) {
    const names = drivers.map((d) => `"${d.name}"`);
    const choices = names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names.at(-1)}` : (names[0] ?? 'a driver');
    throw new ConfigError('TENANTRY_PLATFORM', `must be ${choices}, got "${platform}"`);
  }
  const platformSettings = driver.readSettings(get);

  let watchPartners: Config['watchPartners'];
  if (parseBoolean('TENANTRY_WATCH_PARTNERS', get('TENANTRY_WATCH_PARTNERS') ?? fallbackOf('TENANTRY_WATCH_PARTNERS'))) {
    const kubeconfig = get('TENANTRY_KUBECONFIG');
    if (kubeconfig !== undefined && !existsSync(kubeconfig)) throw new ConfigError('TENANTRY_KUBECONFIG', `no such file: ${kubeconfig}`);
    if (kubeconfig === undefined && !existsSync(`${SERVICE_ACCOUNT_DIR}/token`))
      throw new ConfigError('TENANTRY_WATCH_PARTNERS', 'needs a cluster: set TENANTRY_KUBECONFIG, or run in a pod with a service account');
    const namespace = get('TENANTRY_PARTNERS_NAMESPACE');
    if (namespace !== undefined && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace))
      throw new ConfigError('TENANTRY_PARTNERS_NAMESPACE', `must be a namespace name, got "${namespace}"`);
    watchPartners = { kubeconfig, namespace };
  }

  const webhookCaFile = get('TENANTRY_WEBHOOK_CA_FILE');
  let webhookCa: string | undefined;
  if (webhookCaFile !== undefined) {
    try {
      webhookCa = readFileSync(webhookCaFile, 'utf8');
    } catch (error) {
      throw new ConfigError(
        'TENANTRY_WEBHOOK_CA_FILE',
        `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'}): ${webhookCaFile}`,
      );
    }
    if (!webhookCa.includes('-----BEGIN CERTIFICATE-----')) {
      throw new ConfigError('TENANTRY_WEBHOOK_CA_FILE', `holds no PEM certificate: ${webhookCaFile}`);
    }
  }

  // The file is read again every 30 s and may go bad later (the last good catalogue is then kept); a path
  // that cannot be read at all at start-up is a configuration mistake.
  const osImagesRaw = get('TENANTRY_OS_IMAGES_FILE');
  const osImagesFile = osImagesRaw === undefined ? undefined : resolve(osImagesRaw);
  if (osImagesFile !== undefined) {
    try {
      accessSync(osImagesFile, constants.R_OK);
    } catch (error) {
      throw new ConfigError(
        'TENANTRY_OS_IMAGES_FILE',
        `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'}): ${osImagesFile}`,
      );
    }
  }

  const logLevel = get('TENANTRY_LOG_LEVEL') ?? fallbackOf('TENANTRY_LOG_LEVEL');
  const engineConcurrencyRaw = get('TENANTRY_ENGINE_CONCURRENCY');
  const engineConcurrency =
    engineConcurrencyRaw === undefined ? undefined : parseInteger('TENANTRY_ENGINE_CONCURRENCY', engineConcurrencyRaw, 0, 8);
  if (engineConcurrency === 0 && databaseUrl === undefined) {
    throw new ConfigError(
      'TENANTRY_ENGINE_CONCURRENCY',
      '0 leaves operations to another process sharing a PostgreSQL server; the embedded database has only this one',
    );
  }
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('TENANTRY_LOG_LEVEL', 'must be one of fatal, error, warn, info, debug, trace, silent');
  }

  return {
    databaseUrl,
    databasePoolSize: parseInteger(
      'TENANTRY_DATABASE_POOL_SIZE',
      get('TENANTRY_DATABASE_POOL_SIZE') ?? fallbackOf('TENANTRY_DATABASE_POOL_SIZE'),
      1,
      200,
    ),
    databaseStatementCache: parseInteger(
      'TENANTRY_DATABASE_STATEMENT_CACHE',
      get('TENANTRY_DATABASE_STATEMENT_CACHE') ?? fallbackOf('TENANTRY_DATABASE_STATEMENT_CACHE'),
      0,
      4096,
    ),
    dataDir,
    listen,
    operatorListen,
    publicUrl,
    publicUrlConfigured: get('TENANTRY_PUBLIC_URL') !== undefined,
    operatorToken,
    platform,
    platformSettings,
    watchPartners,
    sandboxDelayMs: parseInteger(
      'TENANTRY_SANDBOX_DELAY_MS',
      get('TENANTRY_SANDBOX_DELAY_MS') ?? fallbackOf('TENANTRY_SANDBOX_DELAY_MS'),
      0,
      3_600_000,
    ),
    sandboxCallMs: parseInteger(
      'TENANTRY_SANDBOX_CALL_MS',
      get('TENANTRY_SANDBOX_CALL_MS') ?? fallbackOf('TENANTRY_SANDBOX_CALL_MS'),
      0,
      60_000,
    ),
    osImagesFile,
    webhookCaFile,
    webhookCa,
    logLevel: logLevel as Config['logLevel'],
    trustProxy: parseTrustProxy(get('TENANTRY_TRUST_PROXY') ?? fallbackOf('TENANTRY_TRUST_PROXY')),
    partnerCacheMs: parseInteger(
      'TENANTRY_PARTNER_CACHE_MS',
      get('TENANTRY_PARTNER_CACHE_MS') ?? fallbackOf('TENANTRY_PARTNER_CACHE_MS'),
      0,
      5000,
    ),
    engineConcurrency,
    webhookConcurrency: parseInteger(
      'TENANTRY_WEBHOOK_CONCURRENCY',
      get('TENANTRY_WEBHOOK_CONCURRENCY') ?? fallbackOf('TENANTRY_WEBHOOK_CONCURRENCY'),
      1,
      256,
    ),
    secretKey: get('TENANTRY_SECRET_KEY'),
    secretKeyFile: get('TENANTRY_SECRET_KEY_FILE'),
    fixPermissions: parseBoolean('TENANTRY_FIX_PERMISSIONS', get('TENANTRY_FIX_PERMISSIONS') ?? fallbackOf('TENANTRY_FIX_PERMISSIONS')),
    metricsScrapeToken,
    tracing: otelEndpoint
      ? { endpoint: otelEndpoint, serviceName: get('OTEL_SERVICE_NAME') ?? fallbackOf('OTEL_SERVICE_NAME') }
      : undefined,
  };
}

function parseHostPort(variable: string, value: string): HostPort {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value);
  if (!match) throw new ConfigError(variable, `must be host:port (for example 127.0.0.1:8080), got "${value}"`);
  const port = Number(match[3]);
  if (port > 65535) {
    throw new ConfigError(variable, `port ${port} is out of range: use 1 to 65535 (or 0 for any free port), got "${value}"`);
  }
  return { host: match[1] ?? match[2] ?? '', port };
}

function formatHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

function parseInteger(variable: string, value: string, min: number, max: number): number {
  if (!/^\d+$/.test(value)) throw new ConfigError(variable, `must be a whole number, got "${value}"`);
  const number = Number(value);
  if (number < min || number > max) throw new ConfigError(variable, `must be between ${min} and ${max}, got ${number}`);
  return number;
}

function parseBoolean(variable: string, value: string): boolean {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new ConfigError(variable, `must be true or false, got "${value}"`);
}

/**
 * Never "trust everything": the left of X-Forwarded-For is written by the
 * client. Either the number of proxies in front (1 = the load balancer), or
 * the proxies' addresses and CIDRs.
 */
function parseTrustProxy(value: string): false | number | string[] {
  if (value === 'false' || value === '0') return false;
  if (/^\d+$/.test(value)) return Number(value);
  const entries = value
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  const cidr = /^[0-9a-fA-F:.]+(\/\d{1,3})?$/;
  if (entries.length === 0 || !entries.every((entry) => cidr.test(entry))) {
    throw new ConfigError(
      'TENANTRY_TRUST_PROXY',
      `must be false, a number of proxy hops, or proxy addresses/CIDRs separated by commas; got "${value}"`,
    );
  }
  return entries;
}
