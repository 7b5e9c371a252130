import { writeAudit } from '../audit/service.ts';
import type { AuditTables } from '../audit/tables.ts';
import { platformContext, type Tenant } from '../auth/tenant.ts';
import { customerPlanId } from '../capacity/customer-quotas.ts';
import type { CapacityTables } from '../capacity/tables.ts';
import type { EventRecorder } from '../events/service.ts';
import type { EventTables } from '../events/tables.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import type { OperatorActor } from '../infra/http/operator-auth.ts';
import { answerWith } from '../infra/idempotency/answer.ts';
import type { IdempotencyTables } from '../infra/idempotency/tables.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import { latestOperationOf } from '../operations/service.ts';
import type { OperationTables } from '../operations/tables.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import type { PartnerTables } from '../partners/tables.ts';
import { type Platform, type Workloads, workloadsRunning } from '../platform/platform.ts';
import { toProject } from '../projects/schemas.ts';
import type { ProjectTables } from '../projects/tables.ts';
import type { UserTables } from '../users/tables.ts';
import { type CreatedCustomer, CustomerCreation } from './create.ts';
import { describeStatus, organizationRef, requireActiveCustomer, resumedEvent, startTeardown, suspendedEvent } from './lifecycle.ts';
import { requireCustomer, requireCustomerLocked } from './lookup-service.ts';
import { type CreateCustomerRequest, type Customer, type CustomerWithProjects, type DeleteCustomerResult, toCustomer } from './schemas.ts';
import {
  type CustomerFilters,
  type CustomerRow,
  customerWithProjectsReader,
  findCustomer,
  findCustomerByUid,
  listCustomers,
  lockCustomer,
  setCustomerStatus,
  updateCustomer,
} from './store.ts';
import type { CustomerTables } from './tables.ts';

/** The customer service also records events, idempotent answers, audit entries and operations. */
type CustomerServiceDb = Db<
  CustomerTables &
    EventTables &
    IdempotencyTables &
    AuditTables &
    OperationTables &
    ProjectTables &
    CapacityTables &
    PartnerTables &
    UserTables
>;

export interface CustomerServiceDeps {
  db: CustomerServiceDb;
  clock: Clock;
  cursors: CursorCodec;
  platform: Platform;
  partnerCache: PartnerCache;
  /** Wakes the operation engine after a commit that opened an operation. */
  onOperationOpened: () => void;
  /** How long a customer takes to provision, and so the Retry-After of NOT_READY and TOO_MANY_OPERATIONS. */
  provisioningMs: number;
  /**
   * A customer's suspension or deletion ends its users' console access: the deletes, built on `qc` (the
   * database or the suspending or deleting transaction), each written only when `when` holds, if given.
   */
  /** Ends the customer's console access in the caller's transaction (the console module's rows). */
  revokeConsoleAccess: (trx: CustomerServiceDb, customerUid: string) => Promise<void>;
  events: EventRecorder;
}

const DAY_MS = 24 * 3600 * 1000;

/** `GET /customers/{id}`: the customer with its plan (capacity's) and its projects, in one statement. */
const findCustomerWithProjects = customerWithProjectsReader(customerPlanId);

/**
 * Customers of a partner (CONTRACT §4): create, read, suspend, resume and delete. A change that
 * needs the platform asks it before its transaction (stop or start the workloads, count them) and
 * then commits in one short transaction that checks the customer again under its lock; platform
 * work that takes long (provisioning, teardown) runs as an operation.
 */
export class CustomerService {
  readonly #deps: CustomerServiceDeps;

  readonly #creation: CustomerCreation;

  constructor(deps: CustomerServiceDeps) {
    this.#deps = deps;
    this.#creation = new CustomerCreation({ ...deps, retryAfterS: () => this.retryAfterS });
  }

  /** Seconds a partner should wait for provisioning: NOT_READY's and TOO_MANY_OPERATIONS' Retry-After. */
  get retryAfterS(): number {
    return Math.max(1, Math.ceil(this.#deps.provisioningMs / 1000));
  }

  /** Records the customer, its owner and first project, and opens the `customer.create` operation (202). */
  create(tenant: Tenant, request: CreateCustomerRequest): Promise<CreatedCustomer> {
    return this.#creation.create(tenant, request);
  }

  async get(tenant: Tenant, id: string): Promise<CustomerWithProjects> {
    const row = await findCustomerWithProjects(this.#deps.db, tenant, id);
    if (!row) throw notFound(`Customer ${id}`);
    return { ...toCustomer(row), projects: row.projects.map(toProject) };
  }

  async list(tenant: Tenant, filters: CustomerFilters, query: { limit: number; cursor?: string | undefined }): Promise<Page<Customer>> {
    return listCustomers(this.#deps.db, this.#deps.cursors.scoped(tenant), tenant, filters, query, customerPlanId);
  }

  /** The customer of this partner and mode under its row lock, in the caller's transaction (a quota change's), or undefined. */
  async lock(trx: Db<CustomerTables>, tenant: Tenant, id: string): Promise<CustomerRow | undefined> {
    return lockCustomer(trx, tenant, id);
  }

  /** The customer changed at `at` by another module's change (its plan), in the caller's transaction. */
  async touch(trx: Db<CustomerTables>, uid: string, at: Date): Promise<void> {
    await updateCustomer(trx, uid, { updated_at: at });
  }

  /** The customer of this partner and mode, or 404 (another partner's or mode's customer is not found either). */
  require(tenant: Tenant, id: string): Promise<CustomerRow> {
    return requireCustomer(this.#deps.db, tenant, id);
  }

  /** The customer of this partner and mode, or undefined. */
  async find(tenant: Tenant, id: string): Promise<CustomerRow | undefined> {
    return findCustomer(this.#deps.db, tenant, id);
  }

  /** A customer by internal identity (console sessions name it), whoever's it is. */
  async byUid(uid: string): Promise<CustomerRow | undefined> {
    return findCustomerByUid(this.#deps.db, uid);
  }

  /**
   * Suspends an active customer: its workloads stop (platform first), then one transaction reads it
   * again under its lock and commits the status, the end of its users' console access and the event.
   */
  async suspend(tenant: Tenant, id: string, reason: string | undefined) {
    const { db, platform, revokeConsoleAccess } = this.#deps;
    const ctx = platformContext(tenant);
    const before = await this.require(tenant, id);
    if (before.status === 'suspended')
      return suspendResult(before, workloadsRunning(await platform.listWorkloads(ctx, organizationRef(before))));
    requireActiveCustomer(before, 'suspend it', this.retryAfterS);
    const running = workloadsRunning(await platform.stopWorkloads(ctx, organizationRef(before)));
    const now = tenant.now;
    const changes = suspension(now, reason ?? null);
    return db.transaction().execute(async (trx) => {
      const row = await requireCustomerLocked(trx, tenant, id);
      if (row.status === 'suspended') return suspendResult(row, running);
      requireActiveCustomer(row, 'suspend it', this.retryAfterS);
      const updated = await setCustomerStatus(trx, row, 'suspended', changes);
      await revokeConsoleAccess(trx, row.uid);
      await this.#deps.events.record(trx, suspendedEvent(updated, running));
      return answerWith(trx, suspendResult(updated, running));
    });
  }

  /**
   * Resumes a suspended customer, or cancels a scheduled deletion (CONTRACT §4): what suspension
   * stopped starts again (platform first), then the status and the event commit, as a suspension's
   * do. An operator's hold answers CONFLICT (partner-api.md, States rule 7).
   */
  async resume(tenant: Tenant, id: string) {
    const { db, platform } = this.#deps;
    const ctx = platformContext(tenant);
    const before = await this.require(tenant, id);
    if (before.status === 'active')
      return resumeResult(before, workloadsRunning(await platform.listWorkloads(ctx, organizationRef(before))), false);
    this.#requireResumable(before);
    const running = workloadsRunning(await platform.startWorkloads(ctx, organizationRef(before)));
    const now = tenant.now;
    const changes = resumption(now);
    const cancels = (row: CustomerRow) => row.status === 'deletion_scheduled';
    return db.transaction().execute(async (trx) => {
      const row = await requireCustomerLocked(trx, tenant, id);
      if (row.status === 'active') return resumeResult(row, running, false);
      this.#requireResumable(row);
      const updated = await setCustomerStatus(trx, row, 'active', changes);
      await this.#deps.events.record(trx, resumedEvent(row, now, running, cancels(row)));
      return answerWith(trx, resumeResult(updated, running, cancels(row)));
    });
  }

  /**
   * `DELETE /customers/{id}` (CONTRACT §4): a scheduled, recoverable deletion after the grace days,
   * or an immediate teardown. Blocked while VMs or databases exist (the platform is asked before the
   * transaction). Asking again for what is already under way answers the current state.
   */
  async delete(
    tenant: Tenant,
    id: string,
    request: { mode: 'scheduled' | 'immediate'; grace_days?: number | undefined },
  ): Promise<DeleteCustomerResult> {
    const { db, platform, revokeConsoleAccess } = this.#deps;
    if (request.mode === 'immediate' && request.grace_days !== undefined) {
      throw validationError([{ in: 'query', field: 'grace_days', message: 'applies only to mode=scheduled' }]);
    }
    const before = await this.require(tenant, id);
    const settled = await this.#deletionSettled(before, request.mode);
    if (settled) return settled;
    const workloads = await platform.listWorkloads(platformContext(tenant), organizationRef(before));
    assertNoLiveWorkloads(before, workloads);
    const now = tenant.now;
    const result = await db.transaction().execute(async (trx) => {
      const row = await requireCustomerLocked(trx, tenant, id);
      const again = await this.#deletionSettled(row, request.mode, trx);
      if (again) return again;
      // A deletion, even one cancelled later, ends console access for good, as a suspension does.
      await revokeConsoleAccess(trx, row.uid);
      if (request.mode === 'immediate') {
        const { customer, operation } = await startTeardown(trx, row, true, now);
        return answerWith(trx, deleteResult(customer, operation.id));
      }
      const graceDays = request.grace_days ?? tenant.partner.grace_days;
      const scheduledAt = new Date(now.getTime() + graceDays * DAY_MS);
      const updated = await setCustomerStatus(trx, row, 'deletion_scheduled', {
        status_before_deletion: row.status,
        scheduled_deletion_at: scheduledAt,
        grace_days: graceDays,
        updated_at: now,
      });
      await this.#deps.events.record(trx, {
        partnerId: tenant.partnerId,
        mode: tenant.mode,
        type: 'customer.deletion_scheduled',
        at: now,
        data: {
          customer_id: row.id,
          state: 'deletion_scheduled',
          scheduled_deletion_at: scheduledAt.toISOString(),
          grace_days: graceDays,
          recoverable: true,
        },
      });
      return answerWith(trx, deleteResult(updated, null));
    });
    this.#deps.onOperationOpened();
    return result;
  }

  /**
   * The operator's hold (partner-api.md, States rule 7): while set, a partner's resume answers
   * CONFLICT. Audited in the same transaction. `reason` null releases it.
   */
  async setHold(target: { partnerId: string; mode: KeyMode; customerId: string }, reason: string | null, who: OperatorActor) {
    const { db, clock } = this.#deps;
    const now = clock.now();
    return db.transaction().execute(async (trx) => {
      const row = await lockCustomer(trx, target, target.customerId);
      if (!row) throw notFound(`Customer ${target.customerId} of partner ${target.partnerId} (${target.mode})`);
      const before = holdView(row);
      const updated = await updateCustomer(trx, row.uid, { held_at: reason === null ? null : (row.held_at ?? now), hold_reason: reason });
      const after = holdView(updated);
      await writeAudit(trx, {
        actor: who.actor,
        requestId: who.requestId,
        at: now,
        action: reason === null ? 'customer.hold.release' : 'customer.hold',
        partnerId: target.partnerId,
        target: `partner/${target.partnerId}/${target.mode}/customer/${target.customerId}`,
        before,
        after,
      });
      return after;
    });
  }

  #requireResumable(row: CustomerRow): void {
    if (row.held_at) {
      throw new ApiError('CONFLICT', `Customer ${row.id} is held by the operator and cannot be resumed.`, {
        details: { customer_id: row.id, status: row.status, held: true, hold_reason: row.hold_reason },
      });
    }
    const cancelling = row.status === 'deletion_scheduled';
    if (row.status === 'suspended' || (cancelling && row.status_before_deletion !== 'failed')) return;
    if (row.status === 'provisioning') requireActiveCustomer(row, 'resume it', this.retryAfterS);
    throw new ApiError('CONFLICT', `Customer ${row.id} is ${describeStatus(row.status)} and cannot be resumed.`, {
      details: {
        customer_id: row.id,
        status: row.status,
        ...(cancelling ? { status_before_deletion: row.status_before_deletion } : {}),
      },
    });
  }

  /** What a delete answers without changing anything: a deletion already under way, or one that cannot start yet. */
  async #deletionSettled(
    row: CustomerRow,
    mode: 'scheduled' | 'immediate',
    db: CustomerServiceDb = this.#deps.db,
  ): Promise<DeleteCustomerResult | undefined> {
    if (row.status === 'deleting') return deleteResult(row, (await latestOperationOf(db, row.uid, 'customer.delete'))?.id ?? null);
    if (row.status === 'deletion_scheduled' && mode === 'scheduled') return deleteResult(row, null);
    if (row.status === 'provisioning' && mode === 'scheduled') {
      throw new ApiError(
        'NOT_READY',
        `Customer ${row.id} is still provisioning; delete it with mode=immediate, or schedule the deletion once it is active.`,
        { retryAfter: this.retryAfterS, details: { customer_id: row.id, status: row.status } },
      );
    }
    return undefined;
  }
}

function assertNoLiveWorkloads(row: CustomerRow, workloads: Workloads): void {
  if (workloads.vms.length > 0 || workloads.databases.length > 0) {
    throw new ApiError('CONFLICT', `Customer ${row.id} still has live VMs or databases; remove them before deleting it.`, {
      details: { customer_id: row.id, vms: workloads.vms, databases: workloads.databases },
    });
  }
}

function holdView(row: CustomerRow) {
  return { customer_id: row.id, held: row.held_at !== null, held_at: row.held_at?.toISOString() ?? null, reason: row.hold_reason };
}

function suspendResult(row: CustomerRow, running: number) {
  return {
    customer_id: row.id,
    status: 'suspended' as const,
    suspended_at: (row.suspended_at ?? row.updated_at).toISOString(),
    workloads_running: running,
  };
}

function resumeResult(row: CustomerRow, running: number, cancelled: boolean) {
  return { customer_id: row.id, status: 'active' as const, workloads_running: running, cancelled_scheduled_deletion: cancelled };
}

function deleteResult(row: CustomerRow, operationId: string | null): DeleteCustomerResult {
  return {
    customer_id: row.id,
    status: row.status,
    scheduled_deletion_at: row.scheduled_deletion_at ? row.scheduled_deletion_at.toISOString() : null,
    grace_days: row.grace_days,
    recoverable: row.status === 'deletion_scheduled',
    operation_id: operationId,
  };
}

/** What a suspension changes besides the status. */
const suspension = (now: Date, reason: string | null) => ({ suspended_at: now, suspension_reason: reason, updated_at: now });

/** What a resumption (or a scheduled deletion cancelled) changes besides the status. */
const resumption = (now: Date) => ({
  status_before_deletion: null,
  suspended_at: null,
  suspension_reason: null,
  scheduled_deletion_at: null,
  grace_days: null,
  updated_at: now,
});
