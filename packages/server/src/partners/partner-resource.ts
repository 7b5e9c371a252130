import { PARTNER_DEFAULTS } from './schemas.ts';
import { SCOPES, type Scope } from './scopes.ts';

/** What a Kube-DC `Partner` resource (kube-dc.com/v1) says about a partner, in Tenantry's terms. */
export interface ManagedPartner {
  /** `<namespace>/<name>` of the resource: what `managed_by` records. */
  source: string;
  id: string;
  display_name: string;
  scopes: Scope[];
  limits: {
    max_customers: number;
    max_projects_per_customer: number;
    max_open_operations: number;
    rate_limit_per_minute: number;
    rate_limit_burst: number;
  };
  /** Absent: the resource does not say; Tenantry's value stays. */
  plan_id: string | undefined;
  suspended: boolean;
  plans: string[] | undefined;
  gpu_profiles: string[] | undefined;
  capacity: { pool?: Partial<Amounts>; per_customer_max?: Partial<Amounts> };
  /** spec.customerIdPrefix: the partner's customers are `<prefix>-<customer id>` on the platform. */
  customer_prefix: string | undefined;
  /** spec.portalUrl: the console links the partner's customers to it; null when the resource names none. */
  portal_url: string | null;
  /** spec.contactEmail, or null. */
  contact_email: string | null;
  /** spec.defaults.projectName (Kube-DC's default: `default`). */
  default_project: string;
  /** What the resource says that Tenantry does not enforce, for the resource's status. */
  ignored: string[];
  generation: number;
}

interface Amounts {
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  gpus: Record<string, number>;
}

const PARTNER_ID = /^[a-z][a-z0-9-]{1,30}[a-z0-9]$/;
const UNLIMITED = 10_000;

/** A CPU quantity ("400", "1500m") as whole vCPUs, rounded up. */
export function cpuQuantity(value: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(m?)$/.exec(value);
  if (!match) return undefined;
  const cores = Number(match[1]) / (match[2] ? 1000 : 1);
  return Math.ceil(cores - 1e-9);
}

const BINARY: Record<string, number> = { Ki: 2 ** -20, Mi: 2 ** -10, Gi: 1, Ti: 2 ** 10, Pi: 2 ** 20, Ei: 2 ** 30 };
const DECIMAL: Record<string, number> = { k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18, '': 1 };

/** A memory or storage quantity ("1600Gi", "5Ti", "500G") as whole GiB, rounded up. */
export function gibQuantity(value: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/.exec(value);
  if (!match) return undefined;
  const amount = Number(match[1]);
  const unit = match[2] ?? '';
  const gib = unit in BINARY ? amount * (BINARY[unit] ?? 1) : (amount * (DECIMAL[unit] ?? 1)) / 2 ** 30;
  return Math.ceil(gib - 1e-9);
}

type Spec = Record<string, unknown>;

/** The rate limits: the resource's 0 (or absent) means the platform default. */
function positive(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? Math.min(value, 10_000_000) : fallback;
}

function amounts(value: unknown, field: string, problems: string[]): Partial<Amounts> | undefined {
  if (value === undefined || value === null) return undefined;
  const given = value as { cpu?: string; memory?: string; storage?: string; gpu?: Record<string, { devices?: number; shares?: number }> };
  const out: Partial<Amounts> = {};
  if (given.cpu !== undefined) {
    const vcpu = cpuQuantity(String(given.cpu));
    if (vcpu === undefined) problems.push(`${field}.cpu "${given.cpu}" is not a CPU quantity`);
    else out.vcpu = vcpu;
  }
  for (const [key, target] of [
    ['memory', 'memory_gib'],
    ['storage', 'storage_gib'],
  ] as const) {
    const raw = given[key];
    if (raw === undefined) continue;
    const gib = gibQuantity(String(raw));
    if (gib === undefined) problems.push(`${field}.${key} "${raw}" is not a quantity`);
    else out[target] = gib;
  }
  if (given.gpu)
    out.gpus = Object.fromEntries(Object.entries(given.gpu).map(([profile, grant]) => [profile, grant.devices ?? grant.shares ?? 0]));
  return out;
}

/** The count limits: the resource's 0 means unlimited (Tenantry's highest), absent means Kube-DC's default. */
function count(value: unknown, fallback: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) return fallback;
  return value === 0 ? UNLIMITED : Math.min(value, UNLIMITED);
}

/**
 * Maps a Partner resource's spec onto Tenantry's partner settings. Problems (a name that is no partner id,
 * a quantity that does not parse) are returned for the resource's status instead of being applied.
 */
export function fromResource(object: { metadata?: { name?: string; namespace?: string; generation?: number }; spec?: Spec }): {
  partner: ManagedPartner | undefined;
  problems: string[];
} {
  const problems: string[] = [];
  const name = object.metadata?.name ?? '';
  const spec = (object.spec ?? {}) as Spec;
  if (!PARTNER_ID.test(name)) problems.push(`metadata.name "${name}" is not a partner id (3-32 lowercase letters, digits and dashes)`);
  const displayName = typeof spec.displayName === 'string' ? spec.displayName.trim() : '';
  if (!displayName) problems.push('spec.displayName is required');
  const limits = (spec.limits ?? {}) as Spec;
  const rate = (limits.rateLimit ?? {}) as Spec;
  const defaults = (spec.defaults ?? {}) as Spec;
  const scopes = Array.isArray(spec.scopes) ? spec.scopes.map(String) : [];
  const unknownScope = scopes.find((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknownScope) problems.push(`spec.scopes: unknown scope "${unknownScope}"`);
  const capacity: ManagedPartner['capacity'] = {};
  const pool = amounts(limits.capacity, 'spec.limits.capacity', problems);
  const perCustomer = amounts(limits.perCustomerMax, 'spec.limits.perCustomerMax', problems);
  if (pool) capacity.pool = pool;
  if (perCustomer) capacity.per_customer_max = perCustomer;
  const projectName = typeof defaults.projectName === 'string' ? defaults.projectName : 'default';
  if (!/^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/.test(projectName))
    problems.push(`spec.defaults.projectName "${projectName}" is not a project name (a DNS label of at most 40 characters)`);
  if (problems.length > 0) return { partner: undefined, problems };
  return {
    partner: {
      source: `${object.metadata?.namespace ?? ''}/${name}`,
      id: name,
      display_name: displayName.slice(0, 200),
      scopes: SCOPES.filter((s) => scopes.includes(s)),
      limits: {
        max_customers: typeof limits.maxCustomers === 'number' && limits.maxCustomers >= 0 ? Math.min(limits.maxCustomers, 1_000_000) : 0,
        max_projects_per_customer: count(limits.maxProjectsPerCustomer, 10),
        max_open_operations: count(limits.maxOpenOperations, 100),
        rate_limit_per_minute: positive(rate.requestsPerMinute, PARTNER_DEFAULTS.limits.rate_limit_per_minute),
        rate_limit_burst: positive(rate.burst, PARTNER_DEFAULTS.limits.rate_limit_burst),
      },
      plan_id: typeof defaults.planId === 'string' ? defaults.planId : undefined,
      suspended: spec.suspended === true,
      plans: Array.isArray(limits.allowedPlans) && limits.allowedPlans.length > 0 ? limits.allowedPlans.map(String) : undefined,
      gpu_profiles: Array.isArray(limits.allowedGpuProfiles) ? limits.allowedGpuProfiles.map(String) : [],
      capacity,
      customer_prefix: typeof spec.customerIdPrefix === 'string' && spec.customerIdPrefix ? spec.customerIdPrefix : undefined,
      portal_url: typeof spec.portalUrl === 'string' && spec.portalUrl ? spec.portalUrl : null,
      contact_email: typeof spec.contactEmail === 'string' && spec.contactEmail ? spec.contactEmail : null,
      default_project: projectName,
      ignored: notEnforced(spec),
      generation: object.metadata?.generation ?? 0,
    },
    problems,
  };
}

/** Capacity dimensions of Kube-DC's Partner that Tenantry's pools do not have. */
const DIMENSIONS_NOT_ENFORCED = ['pods', 'publicIPs', 'loadBalancers', 'objectStorage'] as const;
/** Parts of a fractional GPU grant Tenantry does not count: it grants whole devices (or shares, when no devices are given). */
const GPU_PARTS_NOT_ENFORCED = ['memoryMiB', 'corePercent'] as const;

/**
 * The fields a Partner resource sets that Tenantry does not enforce, named as in the resource, so its
 * status can say so rather than let them look applied: capacity dimensions Tenantry's pools lack,
 * fractional GPU parts, and the egress type (Tenantry's projects take TENANTRY_EGRESS_NETWORK_TYPE).
 */
function notEnforced(spec: Spec): string[] {
  const limits = (spec.limits ?? {}) as Spec;
  const out: string[] = [];
  for (const block of ['capacity', 'perCustomerMax'] as const) {
    const given = (limits[block] ?? {}) as Spec;
    for (const dimension of DIMENSIONS_NOT_ENFORCED) if (given[dimension] !== undefined) out.push(`spec.limits.${block}.${dimension}`);
    for (const [profile, grant] of Object.entries((given.gpu ?? {}) as Record<string, Spec>))
      for (const part of GPU_PARTS_NOT_ENFORCED) if (grant?.[part] !== undefined) out.push(`spec.limits.${block}.gpu.${profile}.${part}`);
  }
  if ((spec.defaults as Spec | undefined)?.egressNetworkType !== undefined) out.push('spec.defaults.egressNetworkType');
  return out;
}
