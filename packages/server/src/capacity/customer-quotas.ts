import type { Expression } from 'kysely';
import type { Logger } from 'pino';
import type { Tenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { OrganizationRef, Platform, PlatformContext, Progress, QuotaSpec } from '../platform/platform.ts';
import { assertGrantable, assertPerCustomer, assertPoolFits } from './checks.ts';
import { add, normalize, type Resources, subtract, ZERO } from './resources.ts';
import {
  type CapacitySettings,
  type CustomerQuotaRow,
  capacitySettings,
  DEFAULT_PER_CUSTOMER_MAX,
  DEFAULT_POOL,
  deleteCustomerQuota,
  findCapacityAndPlanQuota,
  findCustomerQuota,
  findPlan,
  insertCustomerQuotas,
  listGpuProfiles,
  lockAllocation,
  markQuotaApplied,
  markQuotaRetry,
  markQuotaToReapply,
  type PlanRow,
  planIdOf,
  quotaForPlatformOf,
  quotasNotApplied,
  saveAllocation,
} from './store.ts';
import type { CapacityTables } from './tables.ts';

/*
 * A customer's plan and quota as the other modules ask for them: capacity decides and writes them (in
 * the caller's transaction where one is given); the customers module creates and removes the customer
 * around them and shows its plan.
 */

export type { CustomerQuotaRow } from './store.ts';

/** 403 PLAN_NOT_ALLOWED for a plan the partner may not assign (or that does not exist). */
export async function assignablePlan(db: Db<CapacityTables>, settings: CapacitySettings, planId: string): Promise<PlanRow> {
  const plan = settings.plans.includes(planId) ? await findPlan(db, planId) : undefined;
  if (!plan) {
    throw new ApiError('PLAN_NOT_ALLOWED', `Plan ${planId} is not one this partner may assign; GET /catalog/plans lists them.`, {
      details: { plan_id: planId, allowed: settings.plans },
    });
  }
  return plan;
}

/** A new customer's plan and quota, checked against the partner's catalogue and per-customer maximum. */
export interface NewCustomerQuota {
  planId: string;
  quota: Resources;
  /** The partner's pool as read then (the operator's change racing a creation is as if it came just after). */
  pool: Resources;
}

/**
 * The plan's quota for a new customer (CONTRACT §4, Customers), read and checked before the creating
 * transaction takes its locks: the plan must be one the partner may assign, its GPU profiles ones it may
 * grant, and it must fit the per-customer maximum.
 */
export async function newCustomerQuota(db: Db<CapacityTables>, tenant: Tenant, planId: string): Promise<NewCustomerQuota> {
  // One read where the full settings take four: the catalogue's lists are read only when a rule needs them.
  const { capacity: row, plan_quota: found } = await findCapacityAndPlanQuota(db, tenant.partnerId, planId);
  const quick = found !== null && (row?.plans ? row.plans.includes(planId) : true) ? found : undefined;
  // Refused: the full check answers PLAN_NOT_ALLOWED naming the plans the partner may assign.
  const quota = quick ?? (await assignablePlan(db, await capacitySettings(db, tenant.partnerId), planId)).quota;
  if (Object.values(quota.gpus).some((n) => n > 0)) {
    assertGrantable(quota, row?.gpu_profiles ?? (await listGpuProfiles(db)).map((p) => p.name));
  }
  assertPerCustomer(quota, row?.per_customer_max ?? DEFAULT_PER_CUSTOMER_MAX);
  return { planId, quota: normalize(quota), pool: row?.pool ?? DEFAULT_POOL };
}

/** A creating transaction's hold on the partner's pool of a mode (the capacity lock). */
export interface PoolHold {
  /**
   * Takes a new customer's quota out of the pool, or throws PARTNER_CAPACITY_EXCEEDED and takes nothing
   * (each create is checked against those taken before it).
   */
  take(wanted: NewCustomerQuota): void;
  /** Writes the taken customers' plan and quota rows (revision 1) and what the pool now has allocated. */
  save(trx: Db<CapacityTables>, customers: ReadonlyArray<{ uid: string; wanted: NewCustomerQuota }>): Promise<void>;
}

/**
 * Takes the capacity lock of the partner's mode in the caller's transaction, for its creations: they
 * wait for it rather than answer BUSY. The caller holds the partner's row first (the lock order).
 */
export async function holdPool(trx: Db<CapacityTables>, partnerId: string, mode: KeyMode): Promise<PoolHold> {
  let allocated = await lockAllocation(trx, partnerId, mode);
  return {
    take(wanted) {
      assertPoolFits(wanted.pool, allocated, ZERO, wanted.quota);
      allocated = add(allocated, wanted.quota);
    },
    async save(db, customers) {
      if (customers.length === 0) return;
      // The creation applies the first revision on the platform itself: the sweep has nothing to apply.
      await insertCustomerQuotas(
        db,
        customers.map(({ uid, wanted }) => ({
          customer_uid: uid,
          plan_id: wanted.planId,
          quota: wanted.quota,
          quota_revision: 1,
          project_caps: {},
          quota_applied_revision: 1,
          quota_retry_revision: null,
          quota_retry_at: null,
          quota_retry_count: 0,
          quota_retry_problem: null,
        })),
      );
      await saveAllocation(db, partnerId, mode, allocated);
    },
  };
}

/** A removed customer's quota goes back to its pool and its row goes, in the removing transaction (before the customer's). */
export async function releaseCustomerQuota(trx: Db<CapacityTables>, customer: { uid: string; partnerId: string; mode: KeyMode }) {
  const quota = await deleteCustomerQuota(trx, customer.uid);
  if (!quota) return;
  const allocated = await lockAllocation(trx, customer.partnerId, customer.mode);
  await saveAllocation(trx, customer.partnerId, customer.mode, subtract(allocated, quota));
}

/** A project the customer's caps name now exists: the platform must take the quota again (the sweep applies it). */
export async function reapplyQuotaForProject(trx: Db<CapacityTables>, customerUid: string, project: string): Promise<void> {
  const row = await findCustomerQuota(trx, customerUid);
  if (row?.project_caps[project]) await markQuotaToReapply(trx, customerUid);
}

/** A customer's plan id, to embed in another module's statement about the customer (`customerUid`: its uid there). */
export function customerPlanId(customerUid: Expression<string>) {
  return planIdOf(customerUid);
}

/** A customer's plan, quota and caps, to embed (as JSON) in another module's statement about the customer. */
export function customerQuotaForPlatform(customerUid: string) {
  return quotaForPlatformOf(customerUid);
}

/** A customer's plan and quota (undefined once it is removed). */
export function customerQuota(db: Db<CapacityTables>, customerUid: string): Promise<CustomerQuotaRow | undefined> {
  return findCustomerQuota(db, customerUid);
}

/** The platform's view of a customer's quota and plan. */
export function quotaSpec(row: Pick<CustomerQuotaRow, 'plan_id' | 'quota' | 'project_caps'>): QuotaSpec {
  return { planId: row.plan_id, quota: row.quota, projectCaps: row.project_caps };
}

/** Quotas the platform has not taken yet and that are due a try, oldest due first. */
export function pendingQuotas(db: Db<CapacityTables>, now: Date, limit: number): Promise<CustomerQuotaRow[]> {
  return quotasNotApplied(db, now, limit);
}

const QUOTA_RETRY_BASE_MS = 1_000;
const QUOTA_RETRY_MAX_MS = 5 * 60_000;

/** The customer whose quota is applied, as the platform names it. */
export interface QuotaHolder {
  partnerId: string;
  mode: KeyMode;
  organization: OrganizationRef;
}

/**
 * Applies a customer's quota on the platform and records the revision it applied. A revision the platform
 * refuses (or cannot take now) is tried again with backoff, 1 s doubling to 5 min, so customers the platform
 * keeps refusing never starve the others' changes; a log line says so on the first failure and at milestones.
 */
export async function applyQuota(
  deps: { db: Db<CapacityTables>; clock: Clock; logger: Logger; platform: Platform },
  holder: QuotaHolder,
  row: CustomerQuotaRow,
): Promise<void> {
  const now = deps.clock.now();
  const ctx: PlatformContext = { partnerId: holder.partnerId, mode: holder.mode, now };
  const progress = await deps.platform
    .applyQuota(ctx, holder.organization, quotaSpec(row))
    .catch((err: unknown): Progress => ({ state: 'unavailable', reason: (err as Error).message }));
  if (progress.state === 'done') {
    await markQuotaApplied(deps.db, row.customer_uid, row.quota_revision);
    return;
  }
  const sameRevision = row.quota_retry_revision === row.quota_revision;
  const count = progress.state === 'in_progress' ? 0 : (sameRevision ? row.quota_retry_count : 0) + 1;
  const problem =
    progress.state === 'failed'
      ? `${progress.code}: ${progress.message}`
      : progress.state === 'unavailable'
        ? progress.reason
        : 'in progress';
  const waitMs =
    progress.state === 'in_progress'
      ? Math.max(0, progress.until.getTime() - now.getTime())
      : Math.min(QUOTA_RETRY_MAX_MS, QUOTA_RETRY_BASE_MS * 2 ** Math.min(count - 1, 20));
  await markQuotaRetry(deps.db, row.customer_uid, row.quota_revision, { at: new Date(now.getTime() + waitMs), count, problem });
  if (count === 1 || (count > 0 && (count & (count - 1)) === 0 && count >= 8))
    deps.logger.warn(
      { customer: row.customer_uid, customer_id: holder.organization.customerId, revision: row.quota_revision, failures: count, problem },
      'the platform did not take a quota; it will be tried again with backoff',
    );
}
