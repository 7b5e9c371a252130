import { jsonArrayFrom } from 'kysely/helpers/postgres';
import type { Tenant } from '../auth/tenant.ts';
import { holdPool, type NewCustomerQuota, newCustomerQuota } from '../capacity/customer-quotas.ts';
import type { CapacityTables } from '../capacity/tables.ts';
import type { Clock } from '../infra/clock.ts';
import { uniqueViolation } from '../infra/db/database.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import { GroupCommit, type Outcome } from '../infra/group-commit.ts';
import { answersFor, currentAnswer, type PendingAnswer } from '../infra/idempotency/answer.ts';
import type { IdempotencyTables } from '../infra/idempotency/tables.ts';
import type { Operation } from '../operations/schemas.ts';
import { toOperation } from '../operations/schemas.ts';
import { assertOperationSlotFree, openOperationCount, operationInsert } from '../operations/store.ts';
import type { OperationTables } from '../operations/tables.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import { adjustCustomerCount, findPartnerForUpdate, type PartnerRow } from '../partners/store.ts';
import type { PartnerTables } from '../partners/tables.ts';
import { NAMESPACE_MAX, reservedUsername } from '../platform/names.ts';
import { namespacesTaken, projectInsert } from '../projects/store.ts';
import type { ProjectTables } from '../projects/tables.ts';
import { userInsert } from '../users/store.ts';
import type { UserTables } from '../users/tables.ts';
import { type NewCustomerRows, newCustomerRows } from './create-rows.ts';
import { type CreateCustomerRequest, type Customer, toCustomer } from './schemas.ts';
import { customerIdsTaken, customerInsert, organizationsTaken } from './store.ts';
import type { CustomerTables } from './tables.ts';

/** A creation writes the customer with its project, owner, operation, quota, allocation and partner count in one transaction. */
type CreateDb = Db<CustomerTables & CapacityTables & PartnerTables & IdempotencyTables & ProjectTables & UserTables & OperationTables>;

export interface CustomerCreationDeps {
  db: CreateDb;
  clock: Clock;
  partnerCache: PartnerCache;
  /** Wakes the operation engine after a commit that opened an operation. */
  onOperationOpened: () => void;
  /** Seconds a partner should wait for provisioning: the Retry-After of TOO_MANY_OPERATIONS. */
  retryAfterS: () => number;
}

/** The most creates one transaction commits together. */
const CREATES_TOGETHER = 50;

export type CreatedCustomer = { customer: Customer; operation: Operation };

/** A create as it waits for its partner's next commit: its rows, names, the quota it asks and its request's answer. */
interface PendingCreate {
  tenant: Tenant;
  request: CreateCustomerRequest;
  rows: NewCustomerRows;
  organization: string;
  namespace: string;
  /** The default plan the create was given (no plan asked), checked again under the lock; null when it asked for one. */
  defaultPlanId: string | null;
  wanted: NewCustomerQuota;
  answer: PendingAnswer | undefined;
}

/**
 * `POST /customers` (CONTRACT §4): records the customer, its owner and first project and opens the
 * `customer.create` operation, taking the plan's quota out of the partner's pool, in one transaction
 * that commits the request's idempotent answer with them.
 *
 * Every create of a partner must hold the partner's row (its count, names and pool stay exact), so
 * creates of a partner and mode commit together: one transaction at a time per process, holding the
 * creates that arrived while the one before ran (ADR 0003). A create checked alone and a create checked
 * in a batch go through the same code; each gets its own answer, and one refused never fails the others.
 */
export class CustomerCreation {
  readonly #deps: CustomerCreationDeps;
  readonly #commits = new GroupCommit<PendingCreate, CreatedCustomer>((creates) => onceMoreOnRace(() => this.#commit(creates)), {
    maxBatch: CREATES_TOGETHER,
  });

  constructor(deps: CustomerCreationDeps) {
    this.#deps = deps;
  }

  async create(tenant: Tenant, request: CreateCustomerRequest): Promise<CreatedCustomer> {
    const { db, partnerCache, onOperationOpened } = this.#deps;
    // The first project: the one asked for, else the partner's default (Kube-DC's Partner `defaults.projectName`).
    const projectName = request.project ?? tenant.partner.default_project;
    // The platform names: the organization is `<partner prefix>-<id>`, its project namespaces `<organization>-<project>`.
    const organization = `${tenant.partner.customer_prefix}-${request.id}`;
    const namespace = `${organization}-${projectName}`;
    const reserved = reservedUsername(request.owner.username);
    if (reserved) throw validationError([{ in: 'body', field: 'owner.username', message: reserved }]);
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
    const rows = newCustomerRows(tenant, request, { organization, namespace, project: projectName }, this.#deps.clock.now());
    const result = await this.#commits.submit(`${tenant.partnerId} ${tenant.mode}`, {
      tenant,
      request,
      rows,
      organization,
      namespace,
      defaultPlanId: request.plan_id === undefined ? wanted.planId : null,
      wanted,
      answer: currentAnswer(),
    });
    partnerCache.invalidate(tenant.partnerId);
    onOperationOpened();
    return result;
  }

  /**
   * One transaction for a partner's creates: the partner's row and its capacity allocation locked (the
   * order every path locks them in), what the creates' checks need read in one statement, each create
   * checked in turn against the others before it, the accepted ones' rows, count and allocation written
   * in one statement, their answers, the commit.
   */
  #commit(creates: PendingCreate[]): Promise<Outcome<CreatedCustomer>[]> {
    const [first] = creates as [PendingCreate];
    const { tenant } = first;
    return this.#deps.db.transaction().execute(async (trx) => {
      const partner = await findPartnerForUpdate(trx, tenant.partnerId);
      if (!partner) return creates.map(() => ({ ok: false as const, error: notFound('The partner') }));
      const pool = await holdPool(trx, tenant.partnerId, tenant.mode);
      const taken = await takenNames(trx, tenant, creates, partner.max_open_operations + creates.length);
      let customers = tenant.mode === 'live' ? partner.customer_count : partner.test_customer_count;
      let open = taken.openOperations;
      const outcomes: Outcome<CreatedCustomer>[] = [];
      const accepted: PendingCreate[] = [];
      for (const create of creates) {
        try {
          assertIdAndNamesFree(create, taken, tenant.partnerId);
          if (partner.max_customers > 0 && customers >= partner.max_customers) {
            throw new ApiError('LIMIT_REACHED', `The partner has reached its maximum of ${partner.max_customers} customers.`, {
              details: { limit: 'max_customers', max: partner.max_customers, current: customers },
            });
          }
          await this.#takeDefaultPlan(trx, create, partner);
          assertOperationSlotFree(open, partner.max_open_operations, this.#deps.retryAfterS());
          // The plan's quota comes out of the partner's pool (CONTRACT §4, Customers).
          pool.take(create.wanted);
          customers++;
          open++;
          taken.claim(create);
          accepted.push(create);
          const customer = toCustomer({ ...create.rows.customer, plan_id: create.wanted.planId });
          outcomes.push({ ok: true, value: { customer, operation: toOperation(create.rows.operation) } });
        } catch (error) {
          outcomes.push({ ok: false, error });
        }
      }
      if (accepted.length === 0) return outcomes;
      await insertRows(
        trx,
        accepted.map((create) => create.rows),
      );
      await adjustCustomerCount(trx, tenant.partnerId, tenant.mode, accepted.length);
      await pool.save(
        trx,
        accepted.map((create) => ({ uid: create.rows.customer.uid, wanted: create.wanted })),
      );
      await answersFor(
        trx,
        outcomes.flatMap((outcome, i) => (outcome.ok ? [{ answer: creates[i]?.answer, data: outcome.value }] : [])),
      );
      return outcomes;
    });
  }

  /** The default plan changed since the create read it (rare): the customer takes the new one. */
  async #takeDefaultPlan(trx: CreateDb, create: PendingCreate, partner: PartnerRow): Promise<void> {
    if (create.defaultPlanId === null || partner.default_plan_id === create.wanted.planId) return;
    create.wanted = await newCustomerQuota(trx, create.tenant, partner.default_plan_id);
  }
}

/** The rows of the accepted creates, each table's in one insert, in one statement. */
async function insertRows(trx: CreateDb, rows: NewCustomerRows[]): Promise<void> {
  const [customers, owners, projects, operations] = [
    rows.map((r) => r.customer),
    rows.map((r) => r.owner),
    rows.map((r) => r.project),
    rows.map((r) => r.operation),
  ];
  await trx
    .with('customer', (qc) => customerInsert(qc, customers))
    .with('owner', (qc) => userInsert(qc, owners))
    .with('project', (qc) => projectInsert(qc, projects))
    .with('operation', (qc) => operationInsert(qc, operations))
    .selectNoFrom((eb) => eb.lit(1).as('written'))
    .execute();
}

/**
 * Runs the batch once more after a deadlock, or after a unique key refused its rows: the names are
 * checked under the partner's lock, and only a partner whose prefix overlapped this one's (before
 * overlaps were refused) can take one meanwhile. The second run checks everything anew.
 */
async function onceMoreOnRace<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if ((error as { code?: unknown } | undefined)?.code !== '40P01' && uniqueViolation(error) === undefined) throw error;
    return run();
  }
}

interface Taken {
  openOperations: number;
  ids: Set<string>;
  /** Organization names on the platform scope, with the customer and partner holding them. */
  organizations: Map<string, { id: string; partner_id: string }>;
  /** Project namespaces on the platform scope, with the project, customer and partner holding them. */
  namespaces: Map<string, { name: string; customer_id: string; partner_id: string }>;
  /** Counts an accepted create's id and names as taken for the creates after it. */
  claim(create: PendingCreate): void;
}

/** What the creates' checks need, read in one statement under the partner's lock. */
async function takenNames(trx: CreateDb, tenant: Tenant, creates: PendingCreate[], openUpTo: number): Promise<Taken> {
  const names = creates.flatMap((create) => [create.organization, create.namespace]);
  const [row] = await trx
    .selectNoFrom((eb) => [
      openOperationCount(eb, tenant.partnerId, tenant.mode, openUpTo).as('open_operations'),
      jsonArrayFrom(
        customerIdsTaken(
          eb,
          tenant,
          creates.map((create) => create.request.id),
        ),
      ).as('ids'),
      jsonArrayFrom(organizationsTaken(eb, tenant.scope, names)).as('organizations'),
      jsonArrayFrom(namespacesTaken(eb, tenant.scope, names)).as('namespaces'),
    ])
    .execute();
  if (!row) throw new Error('a select without FROM answered no row');
  const taken: Taken = {
    openOperations: Number(row.open_operations ?? 0),
    ids: new Set(row.ids.map((r) => r.id)),
    organizations: new Map(row.organizations.map((r) => [r.organization, r])),
    namespaces: new Map(row.namespaces.map((r) => [r.namespace, r])),
    claim: (create) => {
      taken.ids.add(create.request.id);
      taken.organizations.set(create.organization, { id: create.request.id, partner_id: tenant.partnerId });
      taken.namespaces.set(create.namespace, {
        name: create.rows.project.name,
        customer_id: create.request.id,
        partner_id: tenant.partnerId,
      });
    },
  };
  return taken;
}

/**
 * ALREADY_EXISTS for an id the partner has, or a platform name taken: organizations and project
 * namespaces are one name space on the platform (both are namespaces), so customer `globex` with project
 * `default` and customer `globex-default` would both be `<prefix>-globex-default`. A name another
 * partner holds is not described (its customer is not revealed).
 */
function assertIdAndNamesFree(create: PendingCreate, taken: Taken, partnerId: string): void {
  const { request, organization, namespace } = create;
  if (taken.ids.has(request.id))
    throw new ApiError('ALREADY_EXISTS', `Customer ${request.id} already exists.`, { details: { field: 'id', value: request.id } });
  const project = taken.namespaces.get(organization);
  if (taken.organizations.has(organization) || (project && project.partner_id !== partnerId)) {
    throw new ApiError(
      'ALREADY_EXISTS',
      `The platform name ${organization} of customer ${request.id} is already taken; choose another id.`,
      {
        details: { field: 'id', value: request.id },
      },
    );
  }
  if (project) {
    throw new ApiError(
      'ALREADY_EXISTS',
      `The platform name ${organization} of customer ${request.id} is already the namespace of project ${project.name} of customer ${project.customer_id}; choose another id.`,
      { details: { field: 'id', value: request.id, namespace: organization } },
    );
  }
  const field = request.project ? 'project' : 'id';
  const value = request.project ?? request.id;
  const owner = taken.organizations.get(namespace);
  if (owner) {
    const whose = owner.partner_id === partnerId ? ` of customer ${owner.id}` : '';
    throw new ApiError(
      'ALREADY_EXISTS',
      `The namespace ${namespace} of the first project is already the platform name${whose}; choose another id or project.`,
      {
        details: { field, value, namespace },
      },
    );
  }
  if (taken.namespaces.has(namespace)) {
    throw new ApiError(
      'ALREADY_EXISTS',
      `The namespace of project ${create.rows.project.name} of customer ${request.id} is already taken.`,
      {
        details: { field, value },
      },
    );
  }
}
