import { ApiError } from '../infra/errors/catalogue.ts';
import { amountIn, dimensionNames, dimensions, type PartialResources, type Resources } from './resources.ts';

/**
 * The capacity rules of partner-api.md (Behaviour of listed endpoints, items 4 and 5), each throwing
 * its error with `details` naming every dimension at fault, so one answer tells the whole story.
 */

/** 403 GPU_PROFILE_NOT_ALLOWED: a profile granted (above zero) that the partner may not grant. */
export function assertGrantable(quota: Resources, grantable: readonly string[]): void {
  const refused = Object.entries(quota.gpus)
    .filter(([profile, n]) => n > 0 && !grantable.includes(profile))
    .map(([profile]) => profile);
  if (refused.length === 0) return;
  throw new ApiError('GPU_PROFILE_NOT_ALLOWED', `GPU profile ${refused.join(', ')} may not be granted by this partner.`, {
    details: { profiles: refused, grantable: [...grantable] },
  });
}

/** 400 QUOTA_EXCEEDED: a project cap above the customer's quota. */
export function assertProjectCaps(quota: Resources, caps: Record<string, PartialResources>): void {
  const violations: { project: string; dimension: string; cap: number; quota: number }[] = [];
  for (const [project, cap] of Object.entries(caps)) {
    for (const [dimension, value] of dimensions(cap)) {
      const held = amountIn(quota, dimension);
      if (value > held) violations.push({ project, dimension, cap: value, quota: held });
    }
  }
  if (violations.length === 0) return;
  const first = violations[0] as (typeof violations)[number];
  throw new ApiError(
    'QUOTA_EXCEEDED',
    `Project ${first.project} is capped at ${first.cap} ${first.dimension}, above the customer's quota of ${first.quota}${violations.length > 1 ? ` (and ${violations.length - 1} more)` : ''}.`,
    { details: { violations } },
  );
}

/** 409 CUSTOMER_CAPACITY_EXCEEDED: more than one customer may hold. */
export function assertPerCustomer(quota: Resources, max: Resources): void {
  const over = dimensionNames(quota)
    .map((dimension) => ({ dimension, requested: amountIn(quota, dimension), max: amountIn(max, dimension) }))
    .filter((d) => d.requested > d.max);
  if (over.length === 0) return;
  throw new ApiError(
    'CUSTOMER_CAPACITY_EXCEEDED',
    `The quota exceeds the per-customer maximum in ${over.map((d) => d.dimension).join(', ')}.`,
    {
      details: { dimensions: over },
    },
  );
}

/**
 * 409 PARTNER_CAPACITY_EXCEEDED: the pool cannot take the change. Only dimensions that grow are
 * checked (a pool the operator shrank below its allocation does not block decreases); `available` is
 * the most this customer could hold in the dimension.
 */
export function assertPoolFits(pool: Resources, allocated: Resources, previous: Resources, wanted: Resources): void {
  const over = dimensionNames(wanted, previous)
    .map((dimension) => {
      const requested = amountIn(wanted, dimension);
      const before = amountIn(previous, dimension);
      const total = amountIn(pool, dimension);
      const held = amountIn(allocated, dimension);
      return { dimension, requested, available: Math.max(0, total - held + before), total, allocated: held, grows: requested > before };
    })
    .filter((d) => d.grows && d.requested > d.available)
    .map(({ grows: _, ...d }) => d);
  if (over.length === 0) return;
  throw new ApiError(
    'PARTNER_CAPACITY_EXCEEDED',
    `The partner's capacity pool cannot take this in ${over.map((d) => d.dimension).join(', ')}.`,
    {
      details: { dimensions: over },
    },
  );
}

/** 409 GPU_ENTITLEMENT_REDUCTION_BLOCKED: a GPU grant cut below what running workloads use. */
export function assertGpuReduction(
  wanted: Resources,
  inUse: Record<string, number>,
  workloads?: { vms: string[]; databases: string[] },
): void {
  const blockers = Object.entries(inUse)
    .filter(([profile, n]) => n > (wanted.gpus[profile] ?? 0))
    .map(([profile, n]) => ({ profile, requested: wanted.gpus[profile] ?? 0, in_use: n }));
  if (blockers.length === 0) return;
  throw new ApiError(
    'GPU_ENTITLEMENT_REDUCTION_BLOCKED',
    `Running workloads use ${blockers.map((b) => `${b.in_use} ${b.profile}`).join(', ')}; stop them before lowering the grant.`,
    { details: { blockers, ...(workloads ? { workloads } : {}) } },
  );
}
