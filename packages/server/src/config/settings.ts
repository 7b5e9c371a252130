import { STATEMENT_CACHE_DEFAULT } from '../infra/db/named-statements.ts';

/**
 * Every setting of `tenantry serve`, once: `loadConfig` takes its defaults from here, and
 * `tenantry serve --help` prints this table, so the help cannot drift from what the server does.
 */
export interface Setting {
  variable: string;
  /** The `tenantry serve` flag that overrides the variable. */
  flag?: string;
  /** The value used when the variable is unset; absent when unset means "off" or something computed. */
  fallback?: string;
  /** How the default reads when it is not a literal value. */
  defaultText?: string;
  description: string;
}

export const SETTINGS = [
  {
    variable: 'TENANTRY_DATABASE_URL',
    flag: '--database-url <url>',
    defaultText: 'unset: embedded PostgreSQL (PGlite) in TENANTRY_DATA_DIR/db',
    description: 'postgres:// URL of a PostgreSQL server; several tenantry serve processes may share it',
  },
  {
    variable: 'TENANTRY_DATABASE_POOL_SIZE',
    fallback: '10',
    description:
      'PostgreSQL server: connections a process opens at most for requests and background work (1-200); the sandbox opens 4 more',
  },
  {
    variable: 'TENANTRY_DATABASE_STATEMENT_CACHE',
    fallback: String(STATEMENT_CACHE_DEFAULT),
    description: 'PostgreSQL server: statements each connection keeps prepared (0-4096); 0 behind any transaction-mode pooler (PgBouncer)',
  },
  {
    variable: 'TENANTRY_DATA_DIR',
    flag: '--data-dir <dir>',
    fallback: './.tenantry',
    description: 'embedded database files, the generated operator token and secret key; owner-only, or start-up stops',
  },
  {
    variable: 'TENANTRY_FIX_PERMISSIONS',
    flag: '--fix-permissions',
    fallback: 'false',
    description: 'true: make an exposed data directory owner-only instead of refusing to start',
  },
  {
    variable: 'TENANTRY_SECRET_KEY',
    defaultText: 'unset: <data dir>/secret-key, generated on first start (0600)',
    description:
      'the key sealing secrets at rest: 64 hex characters (tenantry secret-key generate); comma-separated during a rotation, active first; the same for every process on one PostgreSQL',
  },
  {
    variable: 'TENANTRY_SECRET_KEY_FILE',
    defaultText: 'unset',
    description: 'a file with the key(s), one per line (a mounted Secret), used when TENANTRY_SECRET_KEY is unset',
  },
  { variable: 'TENANTRY_LISTEN', flag: '--listen <host:port>', fallback: '127.0.0.1:8080', description: 'partner API address' },
  {
    variable: 'TENANTRY_OPERATOR_LISTEN',
    flag: '--operator-listen <host:port>',
    fallback: '127.0.0.1:8081',
    description: 'operator API address; never the partner API address',
  },
  { variable: 'TENANTRY_PUBLIC_URL', defaultText: 'http://<TENANTRY_LISTEN>', description: 'the public base URL (console login links)' },
  {
    variable: 'TENANTRY_OPERATOR_TOKEN',
    defaultText: 'generated on first start into <data dir>/operator-token (mode 0600)',
    description: 'bearer token of the operator API; set it when several processes share a database',
  },
  {
    variable: 'TENANTRY_PLATFORM',
    fallback: 'sandbox',
    description:
      'the live-mode platform (test mode always runs on the sandbox): sandbox, or kubernetes (a Kube-DC cluster; the TENANTRY_KUBE*, _IDP_* settings below)',
  },
  {
    variable: 'TENANTRY_KUBECONFIG',
    defaultText: 'unset: the in-cluster service account',
    description: 'kubernetes: a kubeconfig file for the cluster',
  },
  {
    variable: 'TENANTRY_KUBERNETES_NAMESPACE',
    fallback: 'tenantry',
    defaultText: "the service account's namespace in a cluster, else tenantry",
    description: "kubernetes: the driver's own namespace (address-range reservations)",
  },
  {
    variable: 'TENANTRY_IDP_URL',
    defaultText: 'required with kubernetes',
    description: "kubernetes: the identity provider's (Keycloak's) base URL",
  },
  {
    variable: 'TENANTRY_IDP_ADMIN_REALM',
    fallback: 'master',
    description: "kubernetes: the realm of the identity provider's admin client",
  },
  {
    variable: 'TENANTRY_IDP_CLIENT_ID',
    fallback: 'tenantry',
    description: 'kubernetes: the admin client (client credentials, realm-management roles)',
  },
  {
    variable: 'TENANTRY_IDP_CLIENT_SECRET_FILE',
    defaultText: 'required with kubernetes',
    description: "kubernetes: a file (a mounted Secret) holding the admin client's secret",
  },
  {
    variable: 'TENANTRY_IDP_LOGIN',
    fallback: 'console',
    description:
      "kubernetes: console logins: console (Tenantry's console, once the identity provider allows the user), action-token (Keycloak's magic-link extension, into Kube-DC's console) or impersonation (logs in only the browser holding the admin session)",
  },
  { variable: 'TENANTRY_IDP_LOGIN_CLIENT', fallback: 'kube-dc', description: 'kubernetes, action-token: the client the login is for' },
  {
    variable: 'TENANTRY_IDP_LOGIN_REDIRECT_URL',
    defaultText: 'required with action-token',
    description: 'kubernetes, action-token: where the login lands (the console)',
  },
  {
    variable: 'TENANTRY_KUBE_DC_NAMESPACE',
    fallback: 'kube-dc',
    description: "kubernetes: Kube-DC's own namespace (its images-configmap, and the service account of TENANTRY_KUBE_DC_SERVICE_ACCOUNT)",
  },
  {
    variable: 'TENANTRY_KUBE_DC_SERVICE_ACCOUNT',
    defaultText: 'unset: plan changes of existing customers are refused by Kube-DC',
    description:
      "kubernetes: a service account in Kube-DC's namespace the driver impersonates to change an Organization's plan annotations (Kube-DC's admission allows that to its own namespace only)",
  },
  {
    variable: 'TENANTRY_VM_STORAGE_CLASS',
    defaultText: "unset: the cluster's default StorageClass",
    description: "kubernetes: the StorageClass of a console VM's root disk (Kube-DC's VM tiers: local-path, rbd-vm)",
  },
  {
    variable: 'TENANTRY_ADDRESS_POOL',
    defaultText: 'required with kubernetes',
    description: 'kubernetes: IPv4 CIDRs (comma-separated) that project ranges are taken from',
  },
  {
    variable: 'TENANTRY_PROJECT_PREFIX_LENGTH',
    fallback: '24',
    description: "kubernetes: each project's range size as a prefix length (16-29)",
  },
  { variable: 'TENANTRY_EGRESS_NETWORK_TYPE', fallback: 'cloud', description: "kubernetes: projects' egressNetworkType, cloud or public" },
  {
    variable: 'TENANTRY_METRICS_URL',
    defaultText: 'unset: usage answers UNAVAILABLE',
    description: "kubernetes: Prometheus's base URL for usage (kube-state-metrics)",
  },
  {
    variable: 'TENANTRY_GPU_PROFILES',
    defaultText: 'none',
    description: 'kubernetes: GPU profile=KubeVirt device name pairs, comma-separated (nvidia-a10=nvidia.com/GA102GL_A10)',
  },
  {
    variable: 'TENANTRY_WATCH_PARTNERS',
    flag: '--watch-partners',
    fallback: 'false',
    description: 'true: partners come from Kube-DC Partner resources (kubectl apply); their managed fields are refused here',
  },
  {
    variable: 'TENANTRY_PARTNERS_NAMESPACE',
    defaultText: 'unset: every namespace',
    description: 'with --watch-partners: the namespace whose Partner resources are read',
  },
  {
    variable: 'TENANTRY_ORGANIZATION_EMAIL',
    fallback: 'platform+{organization}@tenantry.invalid',
    description:
      "kubernetes: each Organization's spec.email ({organization} is replaced by its name), which Kube-DC gives its realm's admin user; never a customer user's address",
  },
  {
    variable: 'TENANTRY_SANDBOX_DELAY_MS',
    fallback: '3000',
    description: "the sandbox's provisioning time; a new partner's credentials take a third of it",
  },
  {
    variable: 'TENANTRY_SANDBOX_CALL_MS',
    fallback: '0',
    description: "the sandbox's simulated network latency per platform call (to see a slow platform's effect)",
  },
  {
    variable: 'TENANTRY_OS_IMAGES_FILE',
    defaultText: "the bundled example; on the kubernetes platform, Kube-DC's images-configmap ConfigMap",
    description: "the console's OS image catalogue (images.yaml); read every 30 s, a bad file keeps the last good one",
  },
  {
    variable: 'TENANTRY_ENGINE_CONCURRENCY',
    defaultText: '8 with a PostgreSQL server, 1 embedded',
    description:
      'operations this process works on at once (0-8); more helps when the database is far away; 0 (PostgreSQL only): none, an API-only process; another one sharing the database runs them',
  },
  {
    variable: 'TENANTRY_WEBHOOK_CONCURRENCY',
    fallback: '64',
    description: 'webhook deliveries in flight to one receiver, across every process (1-256); a process sends at most 8 times this at once',
  },
  {
    variable: 'TENANTRY_WEBHOOK_CA_FILE',
    defaultText: 'unset',
    description: 'PEM file of extra CAs trusted for webhook HTTPS (private receivers in labs and tests)',
  },
  { variable: 'TENANTRY_LOG_LEVEL', fallback: 'info', description: 'fatal, error, warn, info, debug, trace or silent' },
  {
    variable: 'TENANTRY_TRUST_PROXY',
    fallback: 'false',
    description: 'behind a load balancer: the proxy hops to trust (1), or the proxies addresses/CIDRs',
  },
  {
    variable: 'TENANTRY_METRICS_SCRAPE_TOKEN',
    defaultText: 'unset: GET /metrics answers without a token, as /healthz and /readyz do',
    description:
      'the bearer token GET /metrics on the operator listener asks for (24 characters or more); never the operator token, which administers',
  },
  {
    variable: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    defaultText: 'unset: no traces (the OpenTelemetry SDK is not loaded)',
    description:
      "an OpenTelemetry collector's OTLP/HTTP base URL (http://collector:4318): a span per request, operation step, platform call and webhook delivery go to <url>/v1/traces",
  },
  { variable: 'OTEL_SERVICE_NAME', fallback: 'tenantry', description: "the spans' service.name, with OTEL_EXPORTER_OTLP_ENDPOINT" },
  {
    variable: 'TENANTRY_PARTNER_CACHE_MS',
    fallback: '2000',
    description: 'how long a process caches a partner record (0-5000): how late another process sees a suspension',
  },
] as const satisfies readonly Setting[];

export type SettingName = (typeof SETTINGS)[number]['variable'];

/** The value a setting takes when its variable is unset. */
export function fallbackOf(variable: SettingName): string {
  const setting: Setting | undefined = SETTINGS.find((s) => s.variable === variable);
  if (setting?.fallback === undefined) throw new Error(`${variable} has no fallback value`);
  return setting.fallback;
}

/** The settings as `tenantry serve --help` shows them: variable, flag, default, meaning. */
export function settingsHelp(): string {
  const lines = SETTINGS.map((s: Setting) => {
    const flag = s.flag ? ` (${s.flag.split(' ')[0]})` : '';
    const fallback = s.fallback ?? s.defaultText ?? 'unset';
    return `  ${s.variable}${flag}\n      ${s.description}\n      default: ${fallback}`;
  });
  return `\nSettings (environment variables; a flag overrides its variable):\n${lines.join('\n')}\n`;
}
