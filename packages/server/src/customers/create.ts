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
import { operationSlots, queueOperations } from '../operations/service.ts';
import type { OperationTables } from '../operations/tables.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import { countPartnerCustomers, lockPartner } from '../partners/service.ts';
import type { PartnerRow, PartnerTables } from '../partners/tables.ts';
import { NAMESPACE_MAX, reservedUsername } from '../platform/names.ts';
import { addFirstProjects, projectNamespacesTaken } from '../projects/service.ts';
import type { ProjectTables } from '../projects/tables.ts';
import { addOwners } from '../users/service.ts';
import type { UserTables } from '../users/tables.ts';
import { type NewCustomerRows, newCustomerRows } from './create-rows.ts';
import { type CreateCustomerRequest, type Customer, toCustomer } from './schemas.ts';
import { customerNamesTaken, insertCustomers } from './store.ts';
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
 * creates that arrived while the one before ran. A create checked alone and a create checked
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
   * order every path locks them in), the names taken and the open operations read once, each create
   * checked in turn against the others before it, the accepted ones' rows (one insert a table, each
   * through its module), count and allocation written, their answers, the commit.
   */
  #commit(creates: PendingCreate[]): Promise<Outcome<CreatedCustomer>[]> {
    const [first] = creates as [PendingCreate];
    const { tenant } = first;
    return this.#deps.db.transaction().execute(async (trx) => {
      const partner = await lockPartner(trx, tenant.partnerId);
      if (!partner) return creates.map(() => ({ ok: false as const, error: notFound('The partner') }));
      const pool = await holdPool(trx, tenant.partnerId, tenant.mode);
      const taken = await takenNames(trx, tenant, creates);
      const slots = await operationSlots(trx, tenant, partner.max_open_operations, creates.length, this.#deps.retryAfterS);
      let customers = tenant.mode === 'live' ? partner.customer_count : partner.test_customer_count;
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
          slots.take();
          // The plan's quota comes out of the partner's pool (CONTRACT §4, Customers).
          pool.take(create.wanted);
          customers++;
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
      await countPartnerCustomers(trx, tenant.partnerId, tenant.mode, accepted.length);
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

/** The accepted creates' customers, then, through their modules, their owners, first projects and operations: one insert each. */
async function insertRows(trx: CreateDb, rows: NewCustomerRows[]): Promise<void> {
  await insertCustomers(
    trx,
    rows.map((r) => r.customer),
  );
  await addOwners(
    trx,
    rows.map((r) => r.owner),
  );
  await addFirstProjects(
    trx,
    rows.map((r) => r.project),
  );
  await queueOperations(
    trx,
    rows.map((r) => r.operation),
  );
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
  ids: Set<string>;
  /** Organization names on the platform scope, with the customer and partner holding them. */
  organizations: Map<string, { id: string; partner_id: string }>;
  /** Project namespaces on the platform scope, with the project, customer and partner holding them. */
  namespaces: Map<string, { name: string; customer_id: string; partner_id: string }>;
  /** Counts an accepted create's id and names as taken for the creates after it. */
  claim(create: PendingCreate): void;
}

/**
 * The ids and platform names the creates' checks need, read under the partner's lock: the customers'
 * in one statement, the projects' namespaces through their module.
 */
async function takenNames(trx: CreateDb, tenant: Tenant, creates: PendingCreate[]): Promise<Taken> {
  const names = creates.flatMap((create) => [create.organization, create.namespace]);
  const customers = await customerNamesTaken(
    trx,
    tenant,
    creates.map((create) => create.request.id),
    names,
  );
  const namespaces = await projectNamespacesTaken(trx, tenant.scope, names);
  const taken: Taken = {
    ids: new Set(customers.ids),
    organizations: new Map(customers.organizations.map((r) => [r.organization, r])),
    namespaces: new Map(namespaces.map((r) => [r.namespace, r])),
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
