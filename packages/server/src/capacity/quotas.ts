import { platformContext, type Tenant } from '../auth/tenant.ts';
import type { EventRecorder } from '../events/service.ts';
import type { EventTables } from '../events/tables.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound } from '../infra/errors/catalogue.ts';
import { answerWith } from '../infra/idempotency/answer.ts';
import type { IdempotencyTables } from '../infra/idempotency/tables.ts';
import type { OrganizationRef, Platform } from '../platform/platform.ts';
import { assertGpuReduction, assertGrantable, assertPerCustomer, assertPoolFits, assertProjectCaps } from './checks.ts';
import { assignablePlan } from './customer-quotas.ts';
import { add, normalize, type PartialResources, type Resources, subtract } from './resources.ts';
import type { Plan, PutQuotaRequest, Quota } from './schemas.ts';
import {
  type CapacitySettings,
  type CustomerQuotaRow,
  capacitySettings,
  findCustomerQuota,
  findPlan,
  LockNotAvailable,
  lockAllocation,
  lockCustomerQuota,
  type PlanRow,
  saveAllocation,
  updateCustomerQuota,
} from './store.ts';
import type { CapacityTables } from './tables.ts';

/** A quota change also records its event and the request's answer, through their modules. */
type QuotaDb = Db<CapacityTables & EventTables & IdempotencyTables>;

/** The customer whose quota changes, as the customers module answers it. */
export interface QuotaCustomer {
  uid: string;
  id: string;
  status: string;
  organization: OrganizationRef;
}

/**
 * The customers a quota change is about, from the customers module (the composition root wires it):
 * capacity sits below customers and knows them only through this.
 */
export interface QuotaCustomers {
  find(tenant: Tenant, id: string): Promise<QuotaCustomer | undefined>;
  /** Reads the customer under its row lock in the caller's transaction. */
  lock(trx: QuotaDb, tenant: Tenant, id: string): Promise<QuotaCustomer | undefined>;
  /** Marks the customer changed at `at` (its plan is a part of it), in the caller's transaction. */
  touch(trx: QuotaDb, uid: string, at: Date): Promise<void>;
}

/** A customer with its plan and quota. */
interface Held {
  customer: QuotaCustomer;
  row: CustomerQuotaRow;
}

/** How long a quota or plan change waits for another capacity change of the partner before BUSY. */
const CAPACITY_LOCK_WAIT_MS = 200;
/** Retry-After of BUSY and GPU_USAGE_UNAVAILABLE. */
const RETRY_AFTER_S = { busy: 1, gpuUsage: 5 } as const;

export function toQuota(customerId: string, row: Pick<CustomerQuotaRow, 'quota_revision' | 'quota' | 'project_caps'>): Quota {
  return { customer_id: customerId, revision: row.quota_revision, quota: normalize(row.quota), project_caps: row.project_caps };
}

export function toPlan(row: PlanRow): Plan {
  return { id: row.id, display_name: row.display_name, quota: normalize(row.quota) };
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
  readonly #customers: QuotaCustomers;
  readonly #events: EventRecorder;

  /**
   * `retryAfterS`: NOT_READY's Retry-After; `changed`: called after a change commits, so
   * the platform applies the new quota soon (the quota sweep does, in the background:
   * the answer never waits on the platform).
   */
  constructor(deps: {
    db: QuotaDb;
    platform: Platform;
    customers: QuotaCustomers;
    retryAfterS: number;
    changed: () => void;
    events: EventRecorder;
  }) {
    this.#db = deps.db;
    this.#customers = deps.customers;
    this.#platform = deps.platform;
    this.#retryAfterS = deps.retryAfterS;
    this.#changed = deps.changed;
    this.#events = deps.events;
  }

  async get(tenant: Tenant, id: string): Promise<Quota> {
    const { customer, row } = await this.#read(tenant, id);
    return toQuota(customer.id, row);
  }

  async getPlan(tenant: Tenant, id: string): Promise<{ customer_id: string; plan_id: string; plan: Plan }> {
    const { customer, row } = await this.#read(tenant, id);
    const plan = await findPlan(this.#db, row.plan_id);
    if (!plan) throw notFound(`Plan ${row.plan_id}`);
    return { customer_id: customer.id, plan_id: row.plan_id, plan: toPlan(plan) };
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
            details: { customer_id: id, revision: row.quota_revision, given: request.revision },
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
      (customerId, updated) => ({ customer_id: customerId, plan_id: updated.plan_id, plan: toPlan(plan) }),
      (row) => ({ quota: normalize(plan.quota), caps: row.project_caps, plan }),
    );
  }

  async #read(tenant: Tenant, id: string): Promise<Held> {
    const customer = await this.#customers.find(tenant, id);
    const row = customer && (await findCustomerQuota(this.#db, customer.uid));
    if (!customer || !row) throw notFound(`Customer ${id}`);
    return { customer, row };
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
    answer: (customerId: string, updated: CustomerQuotaRow) => T,
    decide: (row: CustomerQuotaRow) => Change,
  ): Promise<T> {
    // The platform is asked about GPU usage before the transaction, never while it holds locks (a
    // platform call may take seconds; on PGlite the one connection would wait on itself). What it
    // consumes (a test-mode failure) stays consumed when the change is refused.
    const before = await this.#read(tenant, id);
    assertChangeable(before.customer, this.#retryAfterS);
    const first = decide(before.row);
    assertProjectCaps(first.quota, first.caps);
    assertPerCustomer(first.quota, settings.perCustomerMax);
    const gpuView = gpusReduced(before.row.quota, first.quota)
      ? await this.#gpuView(tenant, before.customer, first.plan !== undefined)
      : undefined;

    const changed = await this.#db.transaction().execute(async (trx) => {
      // The customer's lock first (its status holds until the commit), then its quota's.
      const customer = await this.#customers.lock(trx, tenant, id);
      const row = customer && (await lockCustomerQuota(trx, customer.uid));
      if (!customer || !row) throw notFound(`Customer ${id}`);
      assertChangeable(customer, this.#retryAfterS);
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

      const updated = await updateCustomerQuota(trx, customer.uid, {
        quota,
        project_caps: caps,
        quota_revision: row.quota_revision + 1,
        ...(plan ? { plan_id: plan.id } : {}),
      });
      await this.#customers.touch(trx, customer.uid, tenant.now);
      await saveAllocation(trx, tenant.partnerId, tenant.mode, add(subtract(allocated, row.quota), quota));
      const event = { partnerId: tenant.partnerId, mode: tenant.mode, at: tenant.now };
      await this.#events.record(trx, { ...event, type: 'customer.quota_changed', data: { customer_id: id, quota: toQuota(id, updated) } });
      if (plan) await this.#events.record(trx, { ...event, type: 'customer.plan_changed', data: { customer_id: id, plan_id: plan.id } });
      return answerWith(trx, answer(id, updated));
    });
    // The platform applies the new quota after the commit (an organization's plan and the quota objects it derives).
    this.#changed();
    return changed;
  }

  /** What running workloads use of each GPU profile (and, for a plan change, which workloads); the platform must be able to say. */
  async #gpuView(tenant: Tenant, customer: QuotaCustomer, planChange: boolean): Promise<GpuView> {
    const ctx = platformContext(tenant);
    const inUse = await this.#platform.gpuUsage(ctx, customer.organization);
    if (!inUse) {
      throw new ApiError('GPU_USAGE_UNAVAILABLE', 'GPU usage could not be verified for this change; retry shortly.', {
        retryAfter: RETRY_AFTER_S.gpuUsage,
        details: { customer_id: customer.id },
      });
    }
    if (!planChange) return { inUse };
    const workloads = await this.#platform.listWorkloads(ctx, customer.organization);
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
function assertChangeable(row: QuotaCustomer, retryAfterS: number): void {
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
