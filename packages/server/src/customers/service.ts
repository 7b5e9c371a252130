import {
  type DeleteQueryBuilder,
  type DeleteResult,
  type Expression,
  type QueryCreator,
  type QueryResult,
  type SqlBool,
  sql,
} from 'kysely';
import { jsonObjectFrom } from 'kysely/helpers/postgres';
import type { Database, Db } from '../app/database.ts';
import { writeAudit } from '../audit/store.ts';
import { type NewCustomerQuota, newCustomerQuota, takeNewCustomerQuota } from '../capacity/quotas.ts';
import type { Resources } from '../capacity/resources.ts';
import { allocationLock, allocationSave } from '../capacity/store.ts';
import { announceRecordedEvent, boundEventInsertOf, type EventValues, eventValues, recordEvent } from '../events/store.ts';
import type { DeliveryState } from '../events/tables.ts';
import type { Clock } from '../infra/clock.ts';
import { retryOnDeadlock, uniqueViolation } from '../infra/db/database.ts';
import { precompile } from '../infra/db/precompiled.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import { newId } from '../infra/ids.ts';
import { KeyedBatches } from '../infra/keyed-batches.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import type { Operation } from '../operations/schemas.ts';
import { toOperation } from '../operations/schemas.ts';
import { assertOperationSlotFree, latestOperation, newOperationRow, type OperationRow, openOperationCount } from '../operations/store.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import type { OperatorActor } from '../partners/service.ts';
import { newCustomerCounted, type PartnerRow } from '../partners/store.ts';
import { NAMESPACE_MAX } from '../platform/names.ts';
import { type Platform, type Workloads, workloadsRunning } from '../platform/platform.ts';
import { platformContext, type Tenant } from '../platform/tenant.ts';
import { toProject } from '../projects/schemas.ts';
import { type ProjectRow, projectByNamespace } from '../projects/store.ts';
import type { UserRow } from '../users/store.ts';
import { createdTogether, NEW_ROWS_WRITTEN, type PendingCreate, withNewCustomerRows } from './create-together.ts';
import { describeStatus, organizationRef, requireActiveCustomer, resumedEvent, startTeardown, suspendedEvent } from './lifecycle.ts';
import { type CreateCustomerRequest, type Customer, type CustomerWithProjects, type DeleteCustomerResult, toCustomer } from './schemas.ts';
import {
  type CustomerFilters,
  type CustomerRow,
  customerIdByOrganization,
  customerStatusChange,
  findCustomer,
  findCustomerByUid,
  findCustomerWithProjects,
  listCustomers,
  lockCustomer,
  type StatusGuard,
  setCustomerStatus,
  statusGuard,
  updateCustomer,
} from './store.ts';

export interface CustomerServiceDeps {
  db: Db;
  clock: Clock;
  cursors: CursorCodec;
  platform: Platform;
  partnerCache: PartnerCache;
  /** Wakes the operation engine after a commit that opened an operation. */
  onOperationOpened: () => void;
  /** How long a customer takes to provision: the Retry-After of NOT_READY and TOO_MANY_OPERATIONS (decision 31). */
  provisioningMs: number;
  /**
   * A customer's suspension ends its users' console access: the deletes, built on `qc` (the database
   * or the suspending transaction), each written only when `when` holds, if given (decision 254).
   */
  revokeConsoleAccess: (qc: QueryCreator<Database>, customerUid: string, when?: Expression<SqlBool>) => EndingParts;
}

const DAY_MS = 24 * 3600 * 1000;
/** A partner's create statements at once in one process (decision 211). */
const CREATES_AT_ONCE = 2;
/** The most creates one statement writes together (decision 259). */
const CREATES_TOGETHER = 50;

type Created = { customer: Customer; operation: Operation };

/** The creates that may go together: a partner's of one mode. */
const createsKey = (tenant: Pick<Tenant, 'partnerId' | 'mode'>) => `${tenant.partnerId} ${tenant.mode}`;

/** A create's answer: the customer and its operation as it wrote them. */
const created = ({ rows }: PendingCreate): Created => ({ customer: toCustomer(rows.customer), operation: toOperation(rows.operation) });

/**
 * Customers of a partner (CONTRACT §4): create, read, suspend, resume and delete. A change that
 * needs the platform asks it before its transaction (stop or start the workloads, count them) and
 * then commits in one short transaction that checks the customer again under its lock; platform
 * work that takes long (provisioning, teardown) runs as an operation.
 */
export class CustomerService {
  readonly #deps: CustomerServiceDeps;

  /**
   * A partner's creates of one mode, per process: two statements at once, and what arrives while they
   * run goes together in the next (decisions 211, 259). A partner's creates wait for its row one after
   * another anyway; a burst of them one statement each would hold every pooled connection while they
   * wait, starving other partners' requests and the operation engine, and take the row and commit once
   * per create. A batch that does not plainly pass runs again create by create (`#createOne`).
   */
  readonly #creates = new KeyedBatches<PendingCreate, Created>(
    async (creates) => {
      if (creates.length === 1) return [await retryOnDeadlock(() => this.#createOne(creates[0] as PendingCreate))];
      if (!(await createdTogether(this.#deps.db, creates))) throw new Error('a batch of creates did not plainly pass its checks');
      return creates.map(created);
    },
    { concurrency: CREATES_AT_ONCE, maxBatch: CREATES_TOGETHER },
  );

  /**
   * A suspension committed alone: the status, its end of console access and its event (decisions 254,
   * 280). Compiled at its first run, when the console's revocation is wired in.
   */
  readonly #suspendAlone = precompile((db: Db, a: SuspendArgs) =>
    changeAloneStatement(
      db,
      (qc) => customerStatusChange(qc, a, suspension(a.now, a.reason)),
      a,
      (when) => this.#deps.revokeConsoleAccess(db, a.uid, when),
    ),
  );
  /** A resumption (or a scheduled deletion cancelled) committed alone, with its event. */
  readonly #resumeAlone = precompile((db: Db, a: AloneArgs) =>
    changeAloneStatement(db, (qc) => customerStatusChange(qc, a, resumption(a.now)), a),
  );

  constructor(deps: CustomerServiceDeps) {
    this.#deps = deps;
  }

  /** How many of a partner's creates of a mode wait in this process for the next statement (decision 259). */
  createsWaiting(tenant: Pick<Tenant, 'partnerId' | 'mode'>): number {
    return this.#creates.waiting(createsKey(tenant));
  }

  /**
   * One create: in one statement committed on its own when its checks plainly pass (decision 241);
   * else in a transaction that runs them again and answers the exact error.
   */
  async #createOne(create: PendingCreate): Promise<Created> {
    const { db } = this.#deps;
    if (await createdTogether(db, [create])) return created(create);
    const { tenant, rows, organization, namespace } = create;
    const { customer: row } = rows;
    let { wanted } = create;
    return db.transaction().execute(async (trx) => {
      // The rows first, with no lock held (a clash of ids or namespaces is found by their unique
      // keys), then, in the same statement, the partner's row, whose lock keeps the partner's
      // counts, names and pool exact under concurrent creates. Every create of the partner waits
      // there for the one before to commit, so the round trips from there on are few: this
      // statement's answer, the checks, the commit (decisions 211, 223, 239).
      const { partner, allocated } = await insertAndLockPartner(trx, tenant, rows);
      const current = (tenant.mode === 'live' ? partner.customer_count : partner.test_customer_count) - 1;
      if (partner.max_customers > 0 && current >= partner.max_customers) {
        throw new ApiError('LIMIT_REACHED', `The partner has reached its maximum of ${partner.max_customers} customers.`, {
          details: { limit: 'max_customers', max: partner.max_customers, current },
        });
      }
      // The default plan changed since it was read (rare): the customer takes the new one.
      if (create.defaultPlanId !== null && partner.default_plan_id !== wanted.planId) {
        wanted = await newCustomerQuota(trx, tenant, partner.default_plan_id);
        Object.assign(row, await updateCustomer(trx, row.uid, { plan_id: wanted.planId, quota: wanted.quota }));
      }
      // The plan's quota comes out of the partner's pool (CONTRACT §4, Customers), written with the
      // checks; a refusal rolls everything back.
      const allocation = takeNewCustomerQuota(allocated, wanted);
      const taken = await allocateAndCheck(trx, tenant, allocation.allocated, {
        organization,
        namespace,
        max: partner.max_open_operations,
      });
      assertOperationSlotFree(taken.openOperations, partner.max_open_operations, this.retryAfterS);
      assertNamesFree(create.request, organization, namespace, taken.projectNamedLikeOrganization, taken.customerNamedLikeNamespace);
      allocation.assertFits();
      return created(create);
    });
  }

  /** Seconds a partner should wait for provisioning (decision 31): NOT_READY's and TOO_MANY_OPERATIONS' Retry-After. */
  get retryAfterS(): number {
    return Math.max(1, Math.ceil(this.#deps.provisioningMs / 1000));
  }

  /** Records the customer, its owner and first project, and opens the `customer.create` operation (202). */
  async create(tenant: Tenant, request: CreateCustomerRequest): Promise<{ customer: Customer; operation: Operation }> {
    const { db, partnerCache, onOperationOpened } = this.#deps;
    const projectName = request.project ?? 'default';
    // The platform names: the organization is `<partner prefix>-<id>`, its project namespaces `<organization>-<project>`.
    const organization = `${tenant.partner.customer_prefix}-${request.id}`;
    const namespace = `${organization}-${projectName}`;
    if (namespace.length > NAMESPACE_MAX) {
      throw validationError([
        {
          in: 'body',
          field: request.project ? 'project' : 'id',
          message: `makes the namespace "${namespace}" ${namespace.length} characters long (at most ${NAMESPACE_MAX}: the partner's customer prefix, the id and the project, each with a dash)`,
        },
      ]);
    }
    // What needs no lock is read first: the plan's quota, checked against the partner's catalogue.
    const wanted = await newCustomerQuota(db, tenant, request.plan_id ?? tenant.partner.default_plan_id);
    const rows = newCustomerRows(tenant, request, wanted, { organization, namespace, project: projectName }, this.#deps.clock.now());
    const pending: PendingCreate = {
      tenant,
      request,
      rows,
      organization,
      namespace,
      defaultPlanId: request.plan_id === undefined ? wanted.planId : null,
      wanted,
    };
    const result = await this.#insertOrExplain(request, () => this.#creates.submit(createsKey(tenant), pending));
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

  /** The customer of this partner and mode, or 404 (another partner's or mode's customer is not found either). */
  async require(tenant: Tenant, id: string): Promise<CustomerRow> {
    const row = await findCustomer(this.#deps.db, tenant, id);
    if (!row) throw notFound(`Customer ${id}`);
    return row;
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
   * Suspends an active customer: its workloads stop (platform first), then the status, the end of its
   * users' console access and the event commit: in one statement while the customer is as it was read
   * (decision 254), else in a transaction that reads it again under its lock and explains.
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
    const alone = await changeAlone(db, this.#suspendAlone, {
      ...statusGuard(before, 'suspended'),
      now,
      reason: reason ?? null,
      ...eventValues(suspendedEvent({ ...before, ...changes }, running)),
    });
    if (alone) return suspendResult(alone, running);
    return db.transaction().execute(async (trx) => {
      const row = await this.#lock(trx, tenant, id);
      if (row.status === 'suspended') return suspendResult(row, running);
      requireActiveCustomer(row, 'suspend it', this.retryAfterS);
      const updated = await setCustomerStatus(trx, row, 'suspended', changes);
      for (const end of revokeConsoleAccess(trx, row.uid)) await end.execute();
      await recordEvent(trx, suspendedEvent(updated, running));
      return suspendResult(updated, running);
    });
  }

  /**
   * Resumes a suspended customer, or cancels a scheduled deletion (CONTRACT §4): what suspension
   * stopped starts again (platform first), then the status and the event commit, as a suspension's
   * do (decision 254). An operator's hold answers CONFLICT (partner-api.md, States rule 7).
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
    const alone = await changeAlone(db, this.#resumeAlone, {
      ...statusGuard(before, 'active'),
      now,
      ...eventValues(resumedEvent(before, now, running, cancels(before))),
    });
    if (alone) return resumeResult(alone, running, cancels(before));
    return db.transaction().execute(async (trx) => {
      const row = await this.#lock(trx, tenant, id);
      if (row.status === 'active') return resumeResult(row, running, false);
      this.#requireResumable(row);
      const updated = await setCustomerStatus(trx, row, 'active', changes);
      await recordEvent(trx, resumedEvent(row, now, running, cancels(row)));
      return resumeResult(updated, running, cancels(row));
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
    const { db, platform } = this.#deps;
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
      const row = await this.#lock(trx, tenant, id);
      const again = await this.#deletionSettled(row, request.mode, trx);
      if (again) return again;
      if (request.mode === 'immediate') {
        const { customer, operation } = await startTeardown(trx, row, true, now);
        return deleteResult(customer, operation.id);
      }
      const graceDays = request.grace_days ?? tenant.partner.grace_days;
      const scheduledAt = new Date(now.getTime() + graceDays * DAY_MS);
      const updated = await setCustomerStatus(trx, row, 'deletion_scheduled', {
        status_before_deletion: row.status,
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

  async #lock(trx: Db, tenant: Tenant, id: string): Promise<CustomerRow> {
    const row = await lockCustomer(trx, tenant, id);
    if (!row) throw notFound(`Customer ${id}`);
    return row;
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
    db: Db = this.#deps.db,
  ): Promise<DeleteCustomerResult | undefined> {
    if (row.status === 'deleting') return deleteResult(row, (await latestOperation(db, row.uid, 'customer.delete'))?.id ?? null);
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

  /** Runs an insert, turning a unique-constraint violation into the ALREADY_EXISTS the partner can act on. */
  async #insertOrExplain<T>(request: CreateCustomerRequest, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      const constraint = uniqueViolation(error);
      if (constraint === undefined) throw error;
      // Names are the partner's own (prefixed on the platform): a clash is always with its own customer.
      if (constraint === 'projects_scope_namespace_key') {
        const project = request.project ?? 'default';
        throw new ApiError(
          'ALREADY_EXISTS',
          `The namespace of project ${project} of customer ${request.id} is already taken by another of your projects.`,
          {
            details: { field: request.project ? 'project' : 'id', value: request.project ?? request.id },
          },
        );
      }
      throw new ApiError('ALREADY_EXISTS', `Customer ${request.id} already exists.`, { details: { field: 'id', value: request.id } });
    }
  }
}

export type NewCustomerRows = { customer: CustomerRow; owner: UserRow; project: ProjectRow; operation: OperationRow };

/**
 * A new customer's rows as its create writes them: the customer (provisioning, with the plan's quota),
 * its owner, its first project and its `customer.create` operation.
 */
export function newCustomerRows(
  tenant: Tenant,
  request: CreateCustomerRequest,
  wanted: Pick<NewCustomerQuota, 'planId' | 'quota'>,
  names: { organization: string; namespace: string; project: string },
  platformStateAt: Date,
): NewCustomerRows {
  const now = tenant.now;
  const row: CustomerRow = {
    uid: newId('customer'),
    platform_scope: tenant.scope,
    partner_id: tenant.partnerId,
    mode: tenant.mode,
    id: request.id,
    organization: names.organization,
    external_id: request.external_id ?? null,
    display_name: request.display_name ?? null,
    status: 'provisioning',
    status_before_deletion: null,
    plan_id: wanted.planId,
    owner_username: request.owner.username,
    owner_email: request.owner.email,
    created_at: now,
    updated_at: now,
    suspended_at: null,
    suspension_reason: null,
    scheduled_deletion_at: null,
    grace_days: null,
    deletion_immediate: null,
    quota: wanted.quota,
    quota_revision: 1,
    project_caps: {},
    quota_applied_revision: null,
    quota_retry_revision: null,
    quota_retry_at: null,
    quota_retry_count: 0,
    quota_retry_problem: null,
    held_at: null,
    hold_reason: null,
  };
  // The owner and the first project are made on the platform by the operation (users and projects modules).
  const owner: UserRow = {
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
    platform_state: 'pending',
    platform_state_at: platformStateAt,
  };
  const project: ProjectRow = {
    uid: newId('project'),
    customer_uid: row.uid,
    platform_scope: tenant.scope,
    partner_id: tenant.partnerId,
    mode: tenant.mode,
    customer_id: row.id,
    name: names.project,
    state: 'provisioning',
    namespace: names.namespace,
    cidr: null,
    created_at: now,
    updated_at: now,
  };
  const operation = newOperationRow({
    partnerId: tenant.partnerId,
    mode: tenant.mode,
    type: 'customer.create',
    customerUid: row.uid,
    customerId: row.id,
    project: names.project,
    now,
  });
  return { customer: row, owner, project, operation };
}

/**
 * A new customer's rows, then its count on the partner's row and the capacity lock, in one statement
 * of the create's transaction (decisions 223, 239): the rows (`withNewCustomerRows`; nobody sees the
 * operation before the commit), then the partner's row (the main query) and the allocation (a subquery
 * correlated to it), the order every other path locks them in. One shape per mode (each counts its own
 * customers), compiled once (decision 233).
 */
function rowsThenPartnerLock(mode: KeyMode) {
  return precompile(
    (trx: Db, a: NewCustomerRows & { partnerId: string }) =>
      withNewCustomerRows(trx, a)
        .with('partner', (qc) => newCustomerCounted(qc, a.partnerId, mode).where(NEW_ROWS_WRITTEN))
        .with('allocation', (qc) => allocationLock(qc, a.partnerId, mode))
        .selectFrom('partner')
        .selectAll('partner')
        .select((eb) =>
          eb.selectFrom('allocation').select('allocation.allocated').whereRef('allocation.partner_id', '=', 'partner.id').as('allocated'),
        ),
    { rows: ['customer', 'owner', 'project', 'operation'] },
  );
}
const rowsThenPartnerLockOf = { live: rowsThenPartnerLock('live'), test: rowsThenPartnerLock('test') };

/** Inserts a new customer's rows and answers the partner and what its customers of this mode hold, both locked (`rowsThenPartnerLock`). */
async function insertAndLockPartner(
  trx: Db,
  tenant: Tenant,
  rows: NewCustomerRows,
): Promise<{ partner: PartnerRow; allocated: Resources }> {
  const [locked] = (await rowsThenPartnerLockOf[tenant.mode](trx, { ...rows, partnerId: tenant.partnerId })).rows;
  if (!locked?.allocated) throw notFound('The partner');
  const { allocated, ...partner } = locked;
  return { partner, allocated };
}

/**
 * Writes the partner's new allocation and asks the create's checks, in one statement run with the
 * partner's lock held (a statement of its own: PostgreSQL takes a statement's snapshot when it starts,
 * so beside the locking update these reads would miss the create that held the lock).
 */
const allocationWithChecks = precompile(
  (
    trx: Db,
    a: {
      partnerId: string;
      mode: KeyMode;
      scope: string;
      allocatedJson: string;
      openUpTo: number;
      organization: string;
      namespace: string;
    },
  ) =>
    trx
      .with('allocation', (qc) => allocationSave(qc, a.partnerId, a.mode, a.allocatedJson))
      .selectNoFrom((eb) => [
        openOperationCount(eb, a.partnerId, a.mode, a.openUpTo).as('open_operations'),
        jsonObjectFrom(projectByNamespace(eb, a.scope, a.organization)).as('project'),
        customerIdByOrganization(eb, a.scope, a.namespace).as('customer_id'),
      ]),
);

/**
 * `allocationWithChecks` for this create. The open operations counted include this create's own, so
 * the count goes to one more than `max`.
 */
async function allocateAndCheck(
  trx: Db,
  tenant: Tenant,
  allocated: Resources,
  checks: { organization: string; namespace: string; max: number },
) {
  const [taken] = (
    await allocationWithChecks(trx, {
      partnerId: tenant.partnerId,
      mode: tenant.mode,
      scope: tenant.scope,
      allocatedJson: JSON.stringify(allocated),
      openUpTo: checks.max + 1,
      organization: checks.organization,
      namespace: checks.namespace,
    })
  ).rows;
  if (!taken) throw new Error('a select without FROM answered no row');
  return {
    openOperations: Number(taken.open_operations ?? 1) - 1,
    projectNamedLikeOrganization: taken.project,
    customerNamedLikeNamespace: taken.customer_id,
  };
}

/**
 * Organizations and project namespaces are one name space on the platform (both are namespaces): customer
 * `globex` with project `default` and customer `globex-default` would both be `<prefix>-globex-default`.
 * Checked under the partner's lock, which every create of the partner holds (prefixes never clash across
 * partners), so two creates cannot both pass.
 */
function assertNamesFree(
  request: CreateCustomerRequest,
  organization: string,
  namespace: string,
  project: { name: string; customer_id: string } | null,
  customerId: string | null,
): void {
  if (project) {
    throw new ApiError(
      'ALREADY_EXISTS',
      `The platform name ${organization} of customer ${request.id} is already the namespace of project ${project.name} of customer ${project.customer_id}; choose another id.`,
      { details: { field: 'id', value: request.id, namespace: organization } },
    );
  }
  if (customerId) {
    throw new ApiError(
      'ALREADY_EXISTS',
      `The namespace ${namespace} of the first project is already the platform name of customer ${customerId}; choose another id or project.`,
      { details: { field: request.project ? 'project' : 'id', value: request.project ?? request.id, namespace } },
    );
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

/** Deletes of another module's rows that end with a customer's change, as parts of its statement or transaction. */
export type EndingParts = readonly DeleteQueryBuilder<Database, keyof Database, DeleteResult>[];

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

/** The arguments of a change of status committed alone: the customer's guard, the time, the event's values. */
type AloneArgs = StatusGuard & EventValues & { now: Date };

/** A suspension's arguments: those of any change committed alone, and its reason. */
type SuspendArgs = AloneArgs & { reason: string | null };

/** A change of status committed alone, compiled once (decision 280): see `changeAloneStatement`. */
type AloneStatement<Args extends AloneArgs> = (
  db: Db,
  args: Args,
) => Promise<QueryResult<CustomerRow & { delivery_state: DeliveryState | null }>>;

/**
 * A customer's change of status in one statement of its own (decision 254): the change
 * (`customerStatusChange`, which finds the customer only while it is as the caller read it), what ends
 * with it (`ends`, each part written only with the change) and its event. It answers the changed row
 * with its event's delivery state, or no row when the customer had changed since: then nothing was
 * written. Built of bound values only: suspend and resume each compile it once (decision 280).
 */
function changeAloneStatement(
  db: Db,
  change: (qc: QueryCreator<Database>) => ReturnType<typeof customerStatusChange>,
  values: EventValues,
  ends: (when: Expression<SqlBool>) => EndingParts = () => [],
) {
  const changed = sql<SqlBool>`exists (select 1 from changed)`;
  let statement = db.with('changed', change);
  ends(changed).forEach((part, i) => {
    statement = statement.with(`ended_${i}`, () => part);
  });
  return statement
    .with('event', (qc) => boundEventInsertOf(qc, values, sql`${values.eventData}::jsonb`, changed))
    .selectFrom('changed')
    .selectAll('changed')
    .select((eb) => eb.selectFrom('event').select('delivery_state').as('delivery_state'));
}

/**
 * Runs a change of status committed alone; answers the changed row, or undefined when the customer had
 * changed since it was read: the caller's transaction then reads it again under its lock and explains.
 */
async function changeAlone<Args extends AloneArgs>(db: Db, statement: AloneStatement<Args>, args: Args): Promise<CustomerRow | undefined> {
  const [row] = (await statement(db, args)).rows;
  if (!row) return undefined;
  const { delivery_state, ...customer } = row;
  announceRecordedEvent(delivery_state);
  return customer;
}
