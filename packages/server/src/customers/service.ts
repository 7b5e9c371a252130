import { allocateNewCustomer } from '../capacity/quotas.ts';
import { recordEvent } from '../events/store.ts';
import { type Db, uniqueViolation } from '../infra/db/database.ts';
import type { CustomerStatus } from '../infra/db/schema.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import { newId } from '../infra/ids.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import type { Operation } from '../operations/schemas.ts';
import { toOperation } from '../operations/schemas.ts';
import { assertOperationSlot, insertOperation } from '../operations/store.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import { findPartnerForUpdate } from '../partners/store.ts';
import { NAMESPACE_MAX } from '../platform/names.ts';
import { type Platform, workloadsRunning } from '../platform/platform.ts';
import { platformContext, type Tenant } from '../platform/tenant.ts';
import { toProject } from '../projects/schemas.ts';
import { insertProject } from '../projects/store.ts';
import { insertUser } from '../users/store.ts';
import { describeStatus, requireActiveCustomer, startTeardown } from './lifecycle.ts';
import { type CreateCustomerRequest, type Customer, type CustomerWithProjects, type DeleteCustomerResult, toCustomer } from './schemas.ts';
import {
  adjustCustomerCount,
  type CustomerFilters,
  type CustomerRow,
  findCustomer,
  findCustomerByUid,
  findCustomerWithProjects,
  insertCustomer,
  listCustomers,
  lockCustomer,
  updateCustomer,
} from './store.ts';

export interface CustomerServiceDeps {
  db: Db;
  cursors: CursorCodec;
  platform: Platform;
  partnerCache: PartnerCache;
  /** Wakes the operation engine after a commit that opened an operation. */
  onOperationOpened: () => void;
  /** How long a customer takes to provision, for Retry-After hints. */
  provisioningMs: number;
  /** Called in the transaction that suspends a customer: its users' console sessions end. */
  onCustomerSuspended: (trx: Db, customerUid: string) => Promise<void>;
}

const DAY_MS = 24 * 3600 * 1000;

/** Customers of a partner (CONTRACT §4): create, read, suspend, resume and delete. */
export class CustomerService {
  readonly #deps: CustomerServiceDeps;

  constructor(deps: CustomerServiceDeps) {
    this.#deps = deps;
  }

  /** Records the customer, its owner and first project, and opens the `customer.create` operation (202). */
  async create(tenant: Tenant, request: CreateCustomerRequest): Promise<{ customer: Customer; operation: Operation }> {
    const { db, partnerCache, onOperationOpened } = this.#deps;
    const projectName = request.project ?? 'default';
    const namespace = `${request.id}-${projectName}`;
    if (namespace.length > NAMESPACE_MAX) {
      throw validationError([
        {
          in: 'body',
          field: request.project ? 'project' : 'id',
          message: `makes the namespace "${namespace}" ${namespace.length} characters long; the id and the project together may have at most ${NAMESPACE_MAX - 1}`,
        },
      ]);
    }
    const now = tenant.now;
    const result = await this.#insertOrExplain(request, namespace, () =>
      db.transaction().execute(async (trx) => {
        // The partner row is the lock that keeps its counts exact under concurrent creates.
        const partner = await findPartnerForUpdate(trx, tenant.partnerId);
        if (!partner) throw notFound('The partner');
        const current = tenant.mode === 'live' ? partner.customer_count : partner.test_customer_count;
        if (partner.max_customers > 0 && current >= partner.max_customers) {
          throw new ApiError('LIMIT_REACHED', `The partner has reached its maximum of ${partner.max_customers} customers.`, {
            details: { limit: 'max_customers', max: partner.max_customers, current },
          });
        }
        await assertOperationSlot(trx, tenant.partnerId, tenant.mode, partner.max_open_operations, this.#retryAfterS());
        const planId = request.plan_id ?? partner.default_plan_id;
        // The plan's quota comes out of the partner's pool in this transaction (CONTRACT §4, Customers).
        const quota = await allocateNewCustomer(trx, tenant, planId);
        const row: CustomerRow = {
          uid: newId('customer'),
          platform_scope: tenant.scope,
          partner_id: tenant.partnerId,
          mode: tenant.mode,
          id: request.id,
          external_id: request.external_id ?? null,
          display_name: request.display_name ?? null,
          status: 'provisioning',
          status_before_deletion: null,
          plan_id: planId,
          owner_username: request.owner.username,
          owner_email: request.owner.email,
          created_at: now,
          updated_at: now,
          suspended_at: null,
          suspension_reason: null,
          scheduled_deletion_at: null,
          grace_days: null,
          deletion_immediate: null,
          quota,
          quota_revision: 1,
          project_caps: {},
        };
        await insertCustomer(trx, row);
        await insertUser(trx, {
          uid: newId('user'),
          customer_uid: row.uid,
          platform_scope: tenant.scope,
          partner_id: tenant.partnerId,
          mode: tenant.mode,
          customer_id: row.id,
          username: request.owner.username,
          email: request.owner.email,
          email_key: request.owner.email.toLowerCase(),
          role: 'admin',
          is_owner: true,
          first_name: request.owner.first_name ?? null,
          last_name: request.owner.last_name ?? null,
          required_actions: [],
          created_at: now,
        });
        await insertProject(trx, {
          uid: newId('project'),
          customer_uid: row.uid,
          platform_scope: tenant.scope,
          partner_id: tenant.partnerId,
          mode: tenant.mode,
          customer_id: row.id,
          name: projectName,
          state: 'provisioning',
          namespace,
          cidr: null,
          created_at: now,
          updated_at: now,
        });
        await adjustCustomerCount(trx, tenant.partnerId, tenant.mode, 1);
        const operation = await insertOperation(trx, {
          partnerId: tenant.partnerId,
          mode: tenant.mode,
          type: 'customer.create',
          customerUid: row.uid,
          customerId: row.id,
          project: projectName,
          now,
        });
        return { customer: toCustomer(row), operation: toOperation(operation) };
      }),
    );
    partnerCache.invalidate(tenant.partnerId);
    onOperationOpened();
    return result;
  }

  async get(tenant: Tenant, id: string): Promise<CustomerWithProjects> {
    const row = await findCustomerWithProjects(this.#deps.db, tenant, id);
    if (!row) throw notFound(`Customer ${id}`);
    return { ...toCustomer(row), projects: row.projects.map(toProject) };
  }

  async list(tenant: Tenant, filters: CustomerFilters, query: { limit: number; cursor?: string | undefined }): Promise<Page<Customer>> {
    return listCustomers(this.#deps.db, this.#deps.cursors, tenant, filters, query);
  }

  /** A customer by internal identity (console sessions name it), whoever's it is. */
  async byUid(uid: string): Promise<CustomerRow | undefined> {
    return findCustomerByUid(this.#deps.db, uid);
  }

  /** The customer of this partner and mode, or 404 (another partner's or mode's customer is not found either). */
  async require(tenant: Tenant, id: string): Promise<CustomerRow> {
    const row = await findCustomer(this.#deps.db, tenant, id);
    if (!row) throw notFound(`Customer ${id}`);
    return row;
  }

  async suspend(tenant: Tenant, id: string, reason: string | undefined) {
    const { db, platform } = this.#deps;
    const now = tenant.now;
    return db.transaction().execute(async (trx) => {
      const row = await this.#lock(trx, tenant, id);
      if (row.status === 'suspended') {
        const workloads = await platform.listWorkloads(platformContext(trx, tenant), row.id);
        return suspendResult(row, workloadsRunning(workloads));
      }
      requireActiveCustomer(row, 'suspend it');
      const workloads = await platform.stopWorkloads(platformContext(trx, tenant), row.id);
      const updated = await updateCustomer(trx, row.uid, {
        status: 'suspended',
        suspended_at: now,
        suspension_reason: reason ?? null,
        updated_at: now,
      });
      await this.#deps.onCustomerSuspended(trx, row.uid);
      const result = suspendResult(updated, workloadsRunning(workloads));
      await recordEvent(trx, {
        partnerId: tenant.partnerId,
        mode: tenant.mode,
        type: 'customer.suspended',
        at: now,
        data: { customer_id: row.id, state: 'suspended', suspended_at: result.suspended_at, workloads_running: result.workloads_running },
      });
      return result;
    });
  }

  /** Resumes a suspended customer, or cancels a scheduled deletion (CONTRACT §4). */
  async resume(tenant: Tenant, id: string) {
    const { db, platform } = this.#deps;
    const now = tenant.now;
    return db.transaction().execute(async (trx) => {
      const row = await this.#lock(trx, tenant, id);
      const ctx = platformContext(trx, tenant);
      if (row.status === 'active') {
        const workloads = await platform.listWorkloads(ctx, row.id);
        return resumeResult(row, workloadsRunning(workloads), false);
      }
      const cancelling = row.status === 'deletion_scheduled';
      const resumable = row.status === 'suspended' || (cancelling && row.status_before_deletion !== 'failed');
      if (!resumable) {
        if (row.status === 'provisioning') requireActiveCustomer(row, 'resume it');
        throw new ApiError('CONFLICT', `Customer ${row.id} is ${describeStatus(row.status)} and cannot be resumed.`, {
          details: {
            customer_id: row.id,
            status: row.status,
            ...(cancelling ? { status_before_deletion: row.status_before_deletion } : {}),
          },
        });
      }
      const workloads = await platform.startWorkloads(ctx, row.id);
      const updated = await updateCustomer(trx, row.uid, {
        status: 'active',
        status_before_deletion: null,
        suspended_at: null,
        suspension_reason: null,
        scheduled_deletion_at: null,
        grace_days: null,
        updated_at: now,
      });
      const result = resumeResult(updated, workloadsRunning(workloads), cancelling);
      await recordEvent(trx, {
        partnerId: tenant.partnerId,
        mode: tenant.mode,
        type: 'customer.resumed',
        at: now,
        data: {
          customer_id: row.id,
          state: 'active',
          workloads_running: result.workloads_running,
          cancelled_scheduled_deletion: cancelling,
        },
      });
      return result;
    });
  }

  /**
   * `DELETE /customers/{id}` (CONTRACT §4): a scheduled, recoverable deletion
   * after the grace days, or an immediate teardown. Blocked while VMs or
   * databases exist. Asking again for what is already under way answers the
   * current state.
   */
  async delete(
    tenant: Tenant,
    id: string,
    request: { mode: 'scheduled' | 'immediate'; grace_days?: number | undefined },
  ): Promise<DeleteCustomerResult> {
    const { db, platform } = this.#deps;
    if (request.mode === 'immediate' && request.grace_days !== undefined) {
      throw validationError([{ in: 'query', field: 'grace_days', message: 'applies only to mode=scheduled' }]);
    }
    const now = tenant.now;
    const result = await db.transaction().execute(async (trx) => {
      const row = await this.#lock(trx, tenant, id);
      const ctx = platformContext(trx, tenant);
      if (row.status === 'deleting') return deleteResult(row, await this.#openDeleteOperation(trx, row.uid));
      if (row.status === 'deletion_scheduled' && request.mode === 'scheduled') return deleteResult(row, null);
      if (row.status === 'provisioning' && request.mode === 'scheduled') {
        throw new ApiError(
          'NOT_READY',
          `Customer ${row.id} is still provisioning; delete it with mode=immediate, or schedule the deletion once it is active.`,
          {
            retryAfter: this.#retryAfterS(),
            details: { customer_id: row.id, status: row.status },
          },
        );
      }
      const workloads = await platform.listWorkloads(ctx, row.id);
      if (workloads.vms.length > 0 || workloads.databases.length > 0) {
        throw new ApiError('CONFLICT', `Customer ${row.id} still has live VMs or databases; remove them before deleting it.`, {
          details: { customer_id: row.id, vms: workloads.vms, databases: workloads.databases },
        });
      }
      if (request.mode === 'immediate') {
        const { customer, operation } = await startTeardown(trx, platform, ctx, row, true);
        return deleteResult(customer, operation.id);
      }
      const graceDays = request.grace_days ?? tenant.partner.grace_days;
      const scheduledAt = new Date(now.getTime() + graceDays * DAY_MS);
      const updated = await updateCustomer(trx, row.uid, {
        status: 'deletion_scheduled',
        status_before_deletion: row.status as CustomerStatus,
        scheduled_deletion_at: scheduledAt,
        grace_days: graceDays,
        updated_at: now,
      });
      await recordEvent(trx, {
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
      return deleteResult(updated, null);
    });
    this.#deps.onOperationOpened();
    return result;
  }

  async #lock(trx: Db, tenant: Tenant, id: string): Promise<CustomerRow> {
    const row = await lockCustomer(trx, tenant, id);
    if (!row) throw notFound(`Customer ${id}`);
    return row;
  }

  async #openDeleteOperation(trx: Db, customerUid: string): Promise<string | null> {
    const op = await trx
      .selectFrom('operations')
      .select('id')
      .where('customer_uid', '=', customerUid)
      .where('type', '=', 'customer.delete')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    return op?.id ?? null;
  }

  #retryAfterS(): number {
    return Math.max(1, Math.ceil(this.#deps.provisioningMs / 1000));
  }

  /** Runs an insert, turning a unique-constraint violation into the ALREADY_EXISTS the partner can act on. */
  async #insertOrExplain<T>(request: CreateCustomerRequest, namespace: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      const constraint = uniqueViolation(error);
      if (constraint === undefined) throw error;
      if (constraint === 'users_scope_email_key') {
        throw new ApiError('ALREADY_EXISTS', `The email ${request.owner.email} is already taken by another user.`, {
          details: { field: 'owner.email', value: request.owner.email },
        });
      }
      if (constraint === 'projects_scope_namespace_key') {
        throw new ApiError('ALREADY_EXISTS', `The namespace ${namespace} is already taken.`, {
          details: { field: 'project', namespace },
        });
      }
      throw new ApiError('ALREADY_EXISTS', `Customer ${request.id} already exists.`, { details: { field: 'id', value: request.id } });
    }
  }
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
