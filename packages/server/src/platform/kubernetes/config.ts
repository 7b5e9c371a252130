import { existsSync, readFileSync } from 'node:fs';
import ipaddr from 'ipaddr.js';
import { SERVICE_ACCOUNT_DIR } from '../../config/config.ts';
import { fallbackOf } from '../../config/settings.ts';

/**
 * The kubernetes platform's configuration (docs/platform-kubernetes.md): how to reach the cluster and the
 * identity provider, the operator's address pool and the metrics source. Read only when
 * TENANTRY_PLATFORM=kubernetes; every problem is reported, one line each, before the server starts.
 */
export interface KubernetesPlatformConfig {
  /** A kubeconfig file; undefined: the in-cluster service account. */
  kubeconfig: string | undefined;
  /** The driver's own namespace: address-range reservations live there. */
  namespace: string;
  identity: IdentityConfig;
  /** Workload address pools (IPv4 CIDRs) projects get their `cidrBlock` from. */
  addressPool: string[];
  /** The size of each project's range, as a prefix length (24: a /24 per project). */
  projectPrefixLength: number;
  egressNetworkType: 'cloud' | 'public';
  /** Prometheus's base URL for usage; undefined: usage is unavailable. */
  metricsUrl: string | undefined;
  /** KubeVirt GPU device names (the extended resource a VM asks for) by the GPU profile id partners use. */
  gpuProfiles: Record<string, string>;
  /**
   * Organization.spec.email, with `{organization}` replaced by its name (`organizationEmail`). Kube-DC's
   * controller gives it to the realm's `admin` user, so it is never a customer user's address.
   */
  organizationEmail: string;
  /** Kube-DC's release namespace: its `images-configmap`, and the service account below. */
  kubeDcNamespace: string;
  /** The service account in Kube-DC's namespace whose identity changes Organization annotations; undefined: none. */
  kubeDcServiceAccount: string | undefined;
  /** The StorageClass of a console VM's root disk; undefined: the cluster's default. */
  vmStorageClass: string | undefined;
}

/** An Organization's spec.email. */
export function organizationEmail(config: Pick<KubernetesPlatformConfig, 'organizationEmail'>, organization: string): string {
  return config.organizationEmail.replaceAll('{organization}', organization);
}

export interface IdentityConfig {
  url: string;
  adminRealm: string;
  clientId: string;
  clientSecret: string;
  /**
   * How a one-time console login is minted: `console`, Tenantry's own console link once the identity
   * provider says the user may log in (CONTRACT §7); `action-token` (magic-link extension) or
   * `impersonation`, the identity provider's own link into Kube-DC's console.
   */
  login: 'console' | 'impersonation' | 'action-token';
  /** The client and redirect an action-token login lands on (the Kube-DC console). */
  loginClientId: string;
  loginRedirectUrl: string | undefined;
}

/** One line per problem, each naming its variable. */
export class KubernetesConfigErrors extends Error {
  readonly problems: Array<{ variable: string; problem: string }>;

  constructor(problems: Array<{ variable: string; problem: string }>) {
    super(problems.map((p) => `${p.variable}: ${p.problem}`).join('\n'));
    this.name = 'KubernetesConfigErrors';
    this.problems = problems;
  }
}

type Get = (name: string) => string | undefined;

type Defaulted =
  | 'TENANTRY_KUBERNETES_NAMESPACE'
  | 'TENANTRY_IDP_ADMIN_REALM'
  | 'TENANTRY_IDP_CLIENT_ID'
  | 'TENANTRY_IDP_LOGIN'
  | 'TENANTRY_IDP_LOGIN_CLIENT'
  | 'TENANTRY_KUBE_DC_NAMESPACE'
  | 'TENANTRY_PROJECT_PREFIX_LENGTH'
  | 'TENANTRY_EGRESS_NETWORK_TYPE'
  | 'TENANTRY_ORGANIZATION_EMAIL';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Reads and checks every kubernetes setting; throws KubernetesConfigErrors listing all problems. */
export function loadKubernetesConfig(get: Get): KubernetesPlatformConfig {
  const problems: Array<{ variable: string; problem: string }> = [];
  const problem = (variable: string, text: string) => problems.push({ variable, problem: text });
  // Each read names its variable literally, so the settings test can check SETTINGS lists it.
  const value = (name: Defaulted, read: string | undefined) => read ?? fallbackOf(name);

  const kubeconfig = get('TENANTRY_KUBECONFIG');
  if (kubeconfig !== undefined && !existsSync(kubeconfig)) problem('TENANTRY_KUBECONFIG', `no such file: ${kubeconfig}`);
  if (kubeconfig === undefined && !existsSync(`${SERVICE_ACCOUNT_DIR}/token`))
    problem('TENANTRY_KUBECONFIG', `unset and no in-cluster service account (${SERVICE_ACCOUNT_DIR}/token): set it to a kubeconfig file`);

  let namespace = get('TENANTRY_KUBERNETES_NAMESPACE');
  if (namespace === undefined && kubeconfig === undefined && existsSync(`${SERVICE_ACCOUNT_DIR}/namespace`))
    namespace = readFileSync(`${SERVICE_ACCOUNT_DIR}/namespace`, 'utf8').trim();
  namespace ??= fallbackOf('TENANTRY_KUBERNETES_NAMESPACE');
  if (!DNS_LABEL.test(namespace)) problem('TENANTRY_KUBERNETES_NAMESPACE', `must be a namespace name, got "${namespace}"`);

  const url = get('TENANTRY_IDP_URL');
  if (url === undefined) problem('TENANTRY_IDP_URL', "is required: the identity provider's base URL (https://login.example.com)");
  else if (!/^https?:\/\/[^/\s]+/.test(url)) problem('TENANTRY_IDP_URL', `must be an http(s):// URL, got "${url}"`);
  const secretFile = get('TENANTRY_IDP_CLIENT_SECRET_FILE');
  let clientSecret = '';
  if (secretFile === undefined)
    problem('TENANTRY_IDP_CLIENT_SECRET_FILE', "is required: a file (a mounted Secret) holding the admin client's secret");
  else {
    try {
      clientSecret = readFileSync(secretFile, 'utf8').trim();
      if (!clientSecret) problem('TENANTRY_IDP_CLIENT_SECRET_FILE', `is empty: ${secretFile}`);
    } catch (error) {
      problem('TENANTRY_IDP_CLIENT_SECRET_FILE', `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'}): ${secretFile}`);
    }
  }
  const login = value('TENANTRY_IDP_LOGIN', get('TENANTRY_IDP_LOGIN'));
  if (login !== 'console' && login !== 'impersonation' && login !== 'action-token')
    problem('TENANTRY_IDP_LOGIN', `must be "console", "action-token" or "impersonation", got "${login}"`);
  const loginRedirectUrl = get('TENANTRY_IDP_LOGIN_REDIRECT_URL');
  if (login === 'action-token' && loginRedirectUrl === undefined)
    problem('TENANTRY_IDP_LOGIN_REDIRECT_URL', 'is required with TENANTRY_IDP_LOGIN=action-token: where the login lands (the console URL)');

  const poolRaw = get('TENANTRY_ADDRESS_POOL');
  const addressPool: string[] = [];
  if (poolRaw === undefined)
    problem('TENANTRY_ADDRESS_POOL', 'is required: the IPv4 CIDRs project ranges are taken from (10.100.0.0/16,...)');
  else {
    for (const entry of poolRaw
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean)) {
      try {
        const [address, prefix] = ipaddr.parseCIDR(entry);
        if (address.kind() !== 'ipv4') throw new Error('not IPv4');
        addressPool.push(`${ipaddr.IPv4.networkAddressFromCIDR(entry).toString()}/${prefix}`);
      } catch {
        problem('TENANTRY_ADDRESS_POOL', `"${entry}" is not an IPv4 CIDR`);
      }
    }
  }
  const prefixRaw = value('TENANTRY_PROJECT_PREFIX_LENGTH', get('TENANTRY_PROJECT_PREFIX_LENGTH'));
  const projectPrefixLength = Number(prefixRaw);
  if (!/^\d+$/.test(prefixRaw) || projectPrefixLength < 16 || projectPrefixLength > 29)
    problem('TENANTRY_PROJECT_PREFIX_LENGTH', `must be a prefix length from 16 to 29, got "${prefixRaw}"`);
  else
    for (const pool of addressPool)
      if (Number(pool.split('/')[1]) > projectPrefixLength)
        problem('TENANTRY_ADDRESS_POOL', `${pool} is smaller than one project range (/${projectPrefixLength})`);

  const egress = value('TENANTRY_EGRESS_NETWORK_TYPE', get('TENANTRY_EGRESS_NETWORK_TYPE'));
  if (egress !== 'cloud' && egress !== 'public') problem('TENANTRY_EGRESS_NETWORK_TYPE', `must be "cloud" or "public", got "${egress}"`);

  const metricsUrl = get('TENANTRY_METRICS_URL');
  if (metricsUrl !== undefined && !/^https?:\/\/[^/\s]+/.test(metricsUrl))
    problem('TENANTRY_METRICS_URL', `must be an http(s):// URL (Prometheus), got "${metricsUrl}"`);

  const gpuProfiles: Record<string, string> = {};
  for (const pair of (get('TENANTRY_GPU_PROFILES') ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const match = /^([a-z0-9][a-z0-9._-]*)=([A-Za-z0-9./_-]+)$/.exec(pair);
    if (!match) problem('TENANTRY_GPU_PROFILES', `"${pair}" is not profile=deviceName (nvidia-a10=nvidia.com/GA102GL_A10)`);
    else gpuProfiles[match[1] ?? ''] = match[2] ?? '';
  }
  const orgEmail = value('TENANTRY_ORGANIZATION_EMAIL', get('TENANTRY_ORGANIZATION_EMAIL'));
  const sampleEmail = organizationEmail({ organizationEmail: orgEmail }, 'example-organization');
  // Organization.spec.email: 5 to 256 characters (Kube-DC's CRD), an address Keycloak accepts.
  if (!/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(sampleEmail) || orgEmail.length < 5 || sampleEmail.length > 256)
    problem('TENANTRY_ORGANIZATION_EMAIL', `must be an email address (with {organization} for the Organization's name), got "${orgEmail}"`);

  const kubeDcNamespace = value('TENANTRY_KUBE_DC_NAMESPACE', get('TENANTRY_KUBE_DC_NAMESPACE'));
  if (!DNS_LABEL.test(kubeDcNamespace)) problem('TENANTRY_KUBE_DC_NAMESPACE', `must be a namespace name, got "${kubeDcNamespace}"`);
  const kubeDcServiceAccount = get('TENANTRY_KUBE_DC_SERVICE_ACCOUNT');
  if (kubeDcServiceAccount !== undefined && !DNS_SUBDOMAIN.test(kubeDcServiceAccount))
    problem('TENANTRY_KUBE_DC_SERVICE_ACCOUNT', `must be a service account name, got "${kubeDcServiceAccount}"`);
  const vmStorageClass = get('TENANTRY_VM_STORAGE_CLASS');
  if (vmStorageClass !== undefined && !DNS_SUBDOMAIN.test(vmStorageClass))
    problem('TENANTRY_VM_STORAGE_CLASS', `must be a StorageClass name, got "${vmStorageClass}"`);

  if (problems.length > 0) throw new KubernetesConfigErrors(problems);
  return {
    kubeconfig,
    namespace,
    identity: {
      url: (url ?? '').replace(/\/+$/, ''),
      adminRealm: value('TENANTRY_IDP_ADMIN_REALM', get('TENANTRY_IDP_ADMIN_REALM')),
      clientId: value('TENANTRY_IDP_CLIENT_ID', get('TENANTRY_IDP_CLIENT_ID')),
      clientSecret,
      login: login as IdentityConfig['login'],
      loginClientId: value('TENANTRY_IDP_LOGIN_CLIENT', get('TENANTRY_IDP_LOGIN_CLIENT')),
      loginRedirectUrl,
    },
    addressPool,
    projectPrefixLength,
    egressNetworkType: egress as 'cloud' | 'public',
    metricsUrl: metricsUrl?.replace(/\/+$/, ''),
    gpuProfiles,
    organizationEmail: orgEmail,
    kubeDcNamespace,
    kubeDcServiceAccount,
    vmStorageClass,
  };
}
