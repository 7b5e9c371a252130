import { sql } from 'kysely';
import { jsonObjectFrom } from 'kysely/helpers/postgres';
import type { Db } from '../app/database.ts';
import { type NewCustomerQuota, newCustomerQuota, takeNewCustomerQuota } from '../capacity/quotas.ts';
import type { Resources } from '../capacity/resources.ts';
import { allocationLock, allocationSave } from '../capacity/store.ts';
import type { Clock } from '../infra/clock.ts';
import { retryOnDeadlock, uniqueViolation } from '../infra/db/database.ts';
import { precompile } from '../infra/db/precompiled.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import { answerWith } from '../infra/idempotency/answer.ts';
import { newId } from '../infra/ids.ts';
import { KeyedLimiter } from '../infra/keyed-limiter.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { Operation } from '../operations/schemas.ts';
import { toOperation } from '../operations/schemas.ts';
import { assertOperationSlotFree, newOperationRow, type OperationRow, openOperationCount, operationInsert } from '../operations/store.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import { newCustomerCounted, type PartnerRow } from '../partners/store.ts';
import { NAMESPACE_MAX } from '../platform/names.ts';
import type { Tenant } from '../platform/tenant.ts';
import { type ProjectRow, projectByNamespace, projectInsert } from '../projects/store.ts';
import { type UserRow, userInsert } from '../users/store.ts';
import { type CreateCustomerRequest, type Customer, toCustomer } from './schemas.ts';
import { type CustomerRow, customerIdByOrganization, customerInsert, updateCustomer } from './store.ts';

export interface CustomerCreationDeps {
  db: Db;
  clock: Clock;
  partnerCache: PartnerCache;
  /** Wakes the operation engine after a commit that opened an operation. */
  onOperationOpened: () => void;
  /** Seconds a partner should wait for provisioning: the Retry-After of TOO_MANY_OPERATIONS. */
  retryAfterS: () => number;
}

/** A partner's creates of one mode that one process runs at once. */
const CREATES_AT_ONCE = 2;

export type CreatedCustomer = { customer: Customer; operation: Operation };

/**
 * `POST /customers` (CONTRACT §4): records the customer, its owner and first project, and opens the
 * `customer.create` operation, in one transaction that also takes the plan's quota out of the partner's
 * pool and commits the request's idempotent answer.
 */
export class CustomerCreation {
  readonly #deps: CustomerCreationDeps;
  /**
   * Every create of a partner waits for the partner's row in turn. A burst of them all at once would
   * hold a pooled connection each while they wait, starving other partners' requests and the operation
   * engine; a few at a time keep the row busy without that.
   */
  readonly #creating = new KeyedLimiter(CREATES_AT_ONCE);

  constructor(deps: CustomerCreationDeps) {
    this.#deps = deps;
  }

  async create(tenant: Tenant, request: CreateCustomerRequest): Promise<CreatedCustomer> {
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
    const result = await insertOrExplain(request, organization, () =>
      this.#creating.run(`${tenant.partnerId} ${tenant.mode}`, () => retryOnDeadlock(() => this.#commit(pending))),
    );
    partnerCache.invalidate(tenant.partnerId);
    onOperationOpened();
    return result;
  }

  /**
   * The create's transaction. The rows first, with no lock held (a clash of ids or namespaces is found by
   * their unique keys), then, in the same statement, the partner's row, whose lock keeps the partner's
   * counts, names and pool exact under concurrent creates. Every create of the partner waits there for
   * the one before to commit, so the round trips from there on are few: this statement's answer, the
   * checks, the idempotent answer, the commit.
   */
  #commit(create: PendingCreate): Promise<CreatedCustomer> {
    const { tenant, rows, organization, namespace } = create;
    const { customer: row } = rows;
    let { wanted } = create;
    return this.#deps.db.transaction().execute(async (trx) => {
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
      assertOperationSlotFree(taken.openOperations, partner.max_open_operations, this.#deps.retryAfterS());
      assertNamesFree(create.request, organization, namespace, taken.projectNamedLikeOrganization, taken.customerNamedLikeNamespace);
      allocation.assertFits();
      return answerWith(trx, { customer: toCustomer(row), operation: toOperation(rows.operation) });
    });
  }
}

/** A create as its transaction takes it: its rows, names and the quota it asks. */
interface PendingCreate {
  tenant: Tenant;
  request: CreateCustomerRequest;
  rows: NewCustomerRows;
  organization: string;
  namespace: string;
  /** The default plan the create was given (no plan asked), to be checked under the lock; null when it asked for one. */
  defaultPlanId: string | null;
  wanted: NewCustomerQuota;
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
 * A new customer's rows (the customer, its owner, its first project and its `customer.create`
 * operation) as the first parts of a statement, to be followed by what the create does under its
 * partner's lock. PostgreSQL runs the parts of a statement that nothing reads last, so the part that
 * takes the lock asks for each row part's answer (`NEW_ROWS_WRITTEN`): the rows are written before it
 * waits, and a clash of ids or names fails without waiting for the partner's other creates.
 */
function withNewCustomerRows(db: Db, rows: NewCustomerRows) {
  return db
    .with('customer', (qc) => customerInsert(qc, rows.customer).returning('uid'))
    .with('owner', (qc) => userInsert(qc, rows.owner).returning('uid'))
    .with('project', (qc) => projectInsert(qc, rows.project).returning('uid'))
    .with('operation', (qc) => operationInsert(qc, rows.operation).returning('id'));
}

const NEW_ROWS_WRITTEN = sql<boolean>`exists (select from customer) and exists (select from owner) and exists (select from project) and exists (select from operation)`;

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

/**
 * Runs an insert, turning a unique-constraint violation into the ALREADY_EXISTS the partner can act on,
 * in words that never name another partner's customer (partners whose prefixes overlapped before
 * overlaps were refused can still meet on a platform name).
 */
async function insertOrExplain<T>(request: CreateCustomerRequest, organization: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    const constraint = uniqueViolation(error);
    if (constraint === undefined) throw error;
    if (constraint === 'projects_scope_namespace_key') {
      const project = request.project ?? 'default';
      throw new ApiError('ALREADY_EXISTS', `The namespace of project ${project} of customer ${request.id} is already taken.`, {
        details: { field: request.project ? 'project' : 'id', value: request.project ?? request.id },
      });
    }
    if (constraint === 'customers_scope_organization_key') {
      throw new ApiError(
        'ALREADY_EXISTS',
        `The platform name ${organization} of customer ${request.id} is already taken; choose another id.`,
        {
          details: { field: 'id', value: request.id },
        },
      );
    }
    throw new ApiError('ALREADY_EXISTS', `Customer ${request.id} already exists.`, { details: { field: 'id', value: request.id } });
  }
}
