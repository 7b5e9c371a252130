import { platformContext, type Tenant } from '../auth/tenant.ts';
import { organizationRef } from '../customers/lifecycle.ts';
import { type CustomerRow, findCustomer, lockCustomer, updateCustomer } from '../customers/store.ts';
import type { CustomerTables } from '../customers/tables.ts';
import type { EventRecorder } from '../events/service.ts';
import type { EventTables } from '../events/tables.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound } from '../infra/errors/catalogue.ts';
import { answerWith } from '../infra/idempotency/answer.ts';
import type { IdempotencyTables } from '../infra/idempotency/tables.ts';
import type { Platform } from '../platform/platform.ts';
import { assertGpuReduction, assertGrantable, assertPerCustomer, assertPoolFits, assertProjectCaps } from './checks.ts';
import { add, normalize, type PartialResources, type Resources, subtract, ZERO } from './resources.ts';
import type { Plan, PutQuotaRequest, Quota } from './schemas.ts';
import {
  type CapacitySettings,
  capacitySettings,
  DEFAULT_PER_CUSTOMER_MAX,
  DEFAULT_POOL,
  findCapacityAndPlanQuota,
  findPlan,
  LockNotAvailable,
  listGpuProfiles,
  lockAllocation,
  type PlanRow,
  saveAllocation,
} from './store.ts';
import type { CapacityTables } from './tables.ts';

/** A quota change also locks and updates the customer and records its event, through their modules. */
type QuotaDb = Db<CapacityTables & CustomerTables & EventTables & IdempotencyTables>;

/** How long a quota or plan change waits for another capacity change of the partner before BUSY. */
const CAPACITY_LOCK_WAIT_MS = 200;
/** Retry-After of BUSY and GPU_USAGE_UNAVAILABLE. */
const RETRY_AFTER_S = { busy: 1, gpuUsage: 5 } as const;

export function toQuota(row: Pick<CustomerRow, 'id' | 'quota_revision' | 'quota' | 'project_caps'>): Quota {
  return { customer_id: row.id, revision: row.quota_revision, quota: normalize(row.quota), project_caps: row.project_caps };
}

export function toPlan(row: PlanRow): Plan {
  return { id: row.id, display_name: row.display_name, quota: normalize(row.quota) };
}

/** 403 PLAN_NOT_ALLOWED for a plan the partner may not assign (or that does not exist). */
async function assignablePlan(db: Db<CapacityTables>, settings: CapacitySettings, planId: string): Promise<PlanRow> {
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

/**
 * A new customer's quota taken out of the partner's pool: what its customers of this mode will hold,
 * and the check that it fits (PARTNER_CAPACITY_EXCEEDED), run by the creating transaction after its
 * other checks (the new allocation is written with them, and undone with the rest if any refuses).
 * `allocated` is read under the capacity lock (`allocationLock`); creations wait for that lock rather
 * than answer BUSY.
 */
export function takeNewCustomerQuota(allocated: Resources, wanted: NewCustomerQuota): { allocated: Resources; assertFits(): void } {
  return { allocated: add(allocated, wanted.quota), assertFits: () => assertPoolFits(wanted.pool, allocated, ZERO, wanted.quota) };
}

interface Change {
  quota: Resources;
  caps: Record<string, PartialResources>;
  plan?: PlanRow;
}

/** `GET|PUT /customers/{id}/quota` and `GET|PUT /customers/{id}/plan` (CONTRACT §4, Quota, plan). */
export class QuotaService {
  readonly #db: QuotaDb;
  readonly #platform: Platform;
  readonly #retryAfterS: number;
  readonly #changed: () => void;
  readonly #events: EventRecorder;

  /**
   * `retryAfterS`: NOT_READY's Retry-After; `changed`: called after a change commits, so
   * the platform applies the new quota soon (the customers module's sweep does, in the background:
   * the answer never waits on the platform).
   */
  constructor(deps: { db: QuotaDb; platform: Platform; retryAfterS: number; changed: () => void; events: EventRecorder }) {
    this.#db = deps.db;
    this.#platform = deps.platform;
    this.#retryAfterS = deps.retryAfterS;
    this.#changed = deps.changed;
    this.#events = deps.events;
  }

  async get(tenant: Tenant, id: string): Promise<Quota> {
    return toQuota(await this.#read(tenant, id));
  }

  async getPlan(tenant: Tenant, id: string): Promise<{ customer_id: string; plan_id: string; plan: Plan }> {
    const row = await this.#read(tenant, id);
    const plan = await findPlan(this.#db, row.plan_id);
    if (!plan) throw notFound(`Plan ${row.plan_id}`);
    return { customer_id: row.id, plan_id: row.plan_id, plan: toPlan(plan) };
  }

  async put(tenant: Tenant, id: string, request: PutQuotaRequest): Promise<Quota> {
    const settings = await capacitySettings(this.#db, tenant.partnerId);
    assertGrantable(request.quota, settings.gpuProfiles);
    return this.#change(tenant, id, settings, toQuota, (row) => {
      if (row.quota_revision !== request.revision) {
        throw new ApiError(
          'CONFLICT',
          `The quota is at revision ${row.quota_revision}, not ${request.revision}: read it again and resend.`,
          {
            details: { customer_id: row.id, revision: row.quota_revision, given: request.revision },
          },
        );
      }
      // Omitted caps stay as they are (and must still fit the new quota).
      return { quota: normalize(request.quota), caps: request.project_caps ?? row.project_caps };
    });
  }

  /** Sets the plan and replaces the quota with the plan's (next revision); project caps stay and must fit. */
  async putPlan(tenant: Tenant, id: string, planId: string): Promise<{ customer_id: string; plan_id: string; plan: Plan }> {
    const settings = await capacitySettings(this.#db, tenant.partnerId);
    const plan = await assignablePlan(this.#db, settings, planId);
    assertGrantable(plan.quota, settings.gpuProfiles);
    return this.#change(
      tenant,
      id,
      settings,
      (updated) => ({ customer_id: updated.id, plan_id: updated.plan_id, plan: toPlan(plan) }),
      (row) => ({ quota: normalize(plan.quota), caps: row.project_caps, plan }),
    );
  }

  async #read(tenant: Tenant, id: string): Promise<CustomerRow> {
    const row = await findCustomer(this.#db, tenant, id);
    if (!row) throw notFound(`Customer ${id}`);
    return row;
  }

  /**
   * One quota change, in one transaction, locking the customer and then the
   * partner's capacity lock (waiting at most CAPACITY_LOCK_WAIT_MS, else BUSY). The customer's quota,
   * the pool's allocation, the events and the request's answer (`answer` of the changed customer)
   * commit together, so `allocated` is always the sum.
   */
  async #change<T>(
    tenant: Tenant,
    id: string,
    settings: CapacitySettings,
    answer: (updated: CustomerRow) => T,
    decide: (row: CustomerRow) => Change,
  ): Promise<T> {
    // The platform is asked about GPU usage before the transaction, never while it holds locks (a
    // platform call may take seconds; on PGlite the one connection would wait on itself). What it
    // consumes (a test-mode failure) stays consumed when the change is refused.
    const before = await this.#read(tenant, id);
    assertChangeable(before, this.#retryAfterS);
    const first = decide(before);
    assertProjectCaps(first.quota, first.caps);
    assertPerCustomer(first.quota, settings.perCustomerMax);
    const gpuView = gpusReduced(before.quota, first.quota) ? await this.#gpuView(tenant, before, first.plan !== undefined) : undefined;

    const changed = await this.#db.transaction().execute(async (trx) => {
      const row = await lockCustomer(trx, tenant, id);
      if (!row) throw notFound(`Customer ${id}`);
      assertChangeable(row, this.#retryAfterS);
      const { quota, caps, plan } = decide(row);
      assertProjectCaps(quota, caps);
      assertPerCustomer(quota, settings.perCustomerMax);
      let allocated: Resources;
      try {
        allocated = await lockAllocation(trx, tenant.partnerId, tenant.mode, CAPACITY_LOCK_WAIT_MS);
      } catch (error) {
        if (!(error instanceof LockNotAvailable)) throw error;
        throw busy(id);
      }
      assertPoolFits(settings.pool, allocated, row.quota, quota);
      if (gpusReduced(row.quota, quota)) {
        // A concurrent change raised the grant since the platform was asked: ask again.
        if (!gpuView) throw busy(id);
        assertGpuReduction(quota, gpuView.inUse, gpuView.workloads);
      }

      const updated = await updateCustomer(trx, row.uid, {
        quota,
        project_caps: caps,
        quota_revision: row.quota_revision + 1,
        ...(plan ? { plan_id: plan.id } : {}),
        updated_at: tenant.now,
      });
      await saveAllocation(trx, tenant.partnerId, tenant.mode, add(subtract(allocated, row.quota), quota));
      const event = { partnerId: tenant.partnerId, mode: tenant.mode, at: tenant.now };
      await this.#events.record(trx, { ...event, type: 'customer.quota_changed', data: { customer_id: id, quota: toQuota(updated) } });
      if (plan) await this.#events.record(trx, { ...event, type: 'customer.plan_changed', data: { customer_id: id, plan_id: plan.id } });
      return answerWith(trx, answer(updated));
    });
    // The platform applies the new quota after the commit (an organization's plan and the quota objects it derives).
    this.#changed();
    return changed;
  }

  /** What running workloads use of each GPU profile (and, for a plan change, which workloads); the platform must be able to say. */
  async #gpuView(tenant: Tenant, customer: CustomerRow, planChange: boolean): Promise<GpuView> {
    const ctx = platformContext(tenant);
    const inUse = await this.#platform.gpuUsage(ctx, organizationRef(customer));
    if (!inUse) {
      throw new ApiError('GPU_USAGE_UNAVAILABLE', 'GPU usage could not be verified for this change; retry shortly.', {
        retryAfter: RETRY_AFTER_S.gpuUsage,
        details: { customer_id: customer.id },
      });
    }
    if (!planChange) return { inUse };
    const workloads = await this.#platform.listWorkloads(ctx, organizationRef(customer));
    return { inUse, workloads: { vms: workloads.vms, databases: workloads.databases } };
  }
}

type GpuView = { inUse: Parameters<typeof assertGpuReduction>[1]; workloads?: Parameters<typeof assertGpuReduction>[2] };

/** Whether any GPU profile's grant goes down. */
function gpusReduced(from: Resources, to: Resources): boolean {
  return Object.entries(from.gpus).some(([profile, n]) => (to.gpus[profile] ?? 0) < n);
}

function busy(customerId: string): ApiError {
  return new ApiError('BUSY', 'Another capacity change for this partner is under way; retry shortly.', {
    retryAfter: RETRY_AFTER_S.busy,
    details: { customer_id: customerId },
  });
}

/** A quota or plan change needs a customer that exists on the platform and is not going away. */
function assertChangeable(row: CustomerRow, retryAfterS: number): void {
  if (row.status === 'active' || row.status === 'suspended') return;
  if (row.status === 'provisioning') {
    throw new ApiError('NOT_READY', `Customer ${row.id} is still provisioning; change its quota once it is active.`, {
      retryAfter: retryAfterS,
      details: { customer_id: row.id, status: row.status },
    });
  }
  throw new ApiError('CONFLICT', `Customer ${row.id} is ${row.status.replace('_', ' ')}; its quota cannot change.`, {
    details: { customer_id: row.id, status: row.status },
  });
}
