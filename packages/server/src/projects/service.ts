import type { Tenant } from '../auth/tenant.ts';
import { uniqueViolation } from '../infra/db/database.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import { answerWith } from '../infra/idempotency/answer.ts';
import type { IdempotencyTables } from '../infra/idempotency/tables.ts';
import { newId } from '../infra/ids.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import { type Operation, toOperation } from '../operations/schemas.ts';
import { latestOperationOf, queueOperation, requireOperationSlot } from '../operations/service.ts';
import type { OperationTables } from '../operations/tables.ts';
import { lockPartner } from '../partners/service.ts';
import type { PartnerTables } from '../partners/tables.ts';
import { NAMESPACE_MAX } from '../platform/names.ts';
import type { ProjectCustomers } from './customers.ts';
import { type Project, toProject } from './schemas.ts';
import {
  allProjects,
  findProject,
  insertProject,
  listProjects,
  lockProject,
  namespacesTaken,
  type ProjectRow,
  projectCount,
  projectForPlatformOf,
  projectInsert,
  projectNamed,
  setProjectState,
} from './store.ts';
import type { ProjectTables } from './tables.ts';

/** A project change also locks the partner (and, through `ProjectCustomers`, the customer) and queues an operation. */
type ProjectServiceDb = Db<ProjectTables & PartnerTables & OperationTables & IdempotencyTables>;

export interface ProjectServiceDeps {
  db: ProjectServiceDb;
  cursors: CursorCodec;
  customers: ProjectCustomers;
  onOperationOpened: () => void;
}

/** Writes new customers' first projects in the caller's transaction (the one that writes the customers), in one insert. */
export async function addFirstProjects(trx: Db<ProjectTables>, rows: readonly ProjectRow[]): Promise<void> {
  await projectInsert(trx, rows).execute();
}

/** Of `names`, those that are project namespaces on this platform scope (whoever's), with the project holding each. */
export function projectNamespacesTaken(
  db: Db<ProjectTables>,
  scope: string,
  names: readonly string[],
): Promise<{ namespace: string; name: string; customer_id: string; partner_id: string }[]> {
  return namespacesTaken(db, scope, names).execute();
}

/** The customer's project `name` as provisioning it on the platform needs it: a subquery for the caller's statement. */
export function projectForPlatform(customerUid: string, name: string) {
  return projectForPlatformOf(customerUid, name);
}

/** A customer's projects (CONTRACT §4): created and deleted by operations, read at any time. */
export class ProjectService {
  readonly #deps: ProjectServiceDeps;

  constructor(deps: ProjectServiceDeps) {
    this.#deps = deps;
  }

  /**
   * Opens a project's creation (202). Refusals come in this order: validation (the
   * namespace's length), the customer's state (NOT_READY, CONFLICT), LIMIT_REACHED,
   * TOO_MANY_OPERATIONS, then ALREADY_EXISTS.
   */
  async create(tenant: Tenant, customerId: string, name: string): Promise<{ project: Project; operation: Operation }> {
    const { db, customers, onOperationOpened } = this.#deps;
    const found = await customers.require(tenant, customerId);
    const namespace = `${found.organization}-${name}`;
    if (namespace.length > NAMESPACE_MAX) {
      throw validationError([
        {
          in: 'body',
          field: 'name',
          message: `makes the namespace "${namespace}" ${namespace.length} characters long (at most ${NAMESPACE_MAX}: the customer's platform name, a dash and the project)`,
        },
      ]);
    }
    const now = tenant.now;
    try {
      const result = await db.transaction().execute(async (trx) => {
        // Lock order everywhere: partner, then customer, then project.
        const partner = await lockPartner(trx, tenant.partnerId);
        if (!partner) throw notFound('The partner');
        const customer = await customers.lockActive(trx, tenant, customerId, 'create projects');
        // The customer's projects, and this name among them, in one statement.
        const taken = await trx
          .selectNoFrom((eb) => [projectCount(eb, customer.uid).as('projects'), projectNamed(eb, customer.uid, name).as('same_name')])
          .executeTakeFirstOrThrow();
        const current = Number(taken.projects ?? 0);
        if (current >= partner.max_projects_per_customer) {
          throw new ApiError(
            'LIMIT_REACHED',
            `Customer ${customerId} has reached its maximum of ${partner.max_projects_per_customer} projects.`,
            { details: { limit: 'max_projects_per_customer', max: partner.max_projects_per_customer, current } },
          );
        }
        await requireOperationSlot(trx, tenant, partner.max_open_operations, customers.retryAfterS);
        if (taken.same_name !== null) throw alreadyExists(customerId, name);
        // Namespaces and organizations are one name space on the platform (see CustomerService.create).
        const owner = await customers.namedOnPlatform(trx, tenant.scope, namespace);
        if (owner !== undefined) {
          throw new ApiError('ALREADY_EXISTS', `The namespace ${namespace} is already the platform name of customer ${owner}.`, {
            details: { field: 'name', namespace },
          });
        }
        const row: ProjectRow = {
          uid: newId('project'),
          customer_uid: customer.uid,
          platform_scope: tenant.scope,
          partner_id: tenant.partnerId,
          mode: tenant.mode,
          customer_id: customerId,
          name,
          state: 'provisioning',
          namespace,
          cidr: null,
          created_at: now,
          updated_at: now,
        };
        await insertProject(trx, row);
        const operation = await queueOperation(trx, {
          partnerId: tenant.partnerId,
          mode: tenant.mode,
          type: 'project.create',
          customerUid: customer.uid,
          customerId,
          project: name,
          now,
        });
        return answerWith(trx, { project: toProject(row), operation: toOperation(operation) });
      });
      onOperationOpened();
      return result;
    } catch (error) {
      const constraint = uniqueViolation(error);
      // Another of the partner's customers has the namespace (`acme` + `x-y` and `acme-x` + `y`).
      if (constraint === 'projects_scope_namespace_key') {
        throw new ApiError('ALREADY_EXISTS', `The namespace ${namespace} is already taken.`, { details: { field: 'name', namespace } });
      }
      if (constraint !== undefined) throw alreadyExists(customerId, name);
      throw error;
    }
  }

  /** Every project of a customer, by name (the console lists them). */
  async all(customerUid: string): Promise<ProjectRow[]> {
    return allProjects(this.#deps.db, customerUid);
  }

  async get(tenant: Tenant, customerId: string, name: string): Promise<Project> {
    const customer = await this.#deps.customers.require(tenant, customerId);
    const row = await findProject(this.#deps.db, customer.uid, name);
    if (!row) throw notFound(`Project ${name} of customer ${customerId}`);
    return toProject(row);
  }

  async list(tenant: Tenant, customerId: string, query: { limit: number; cursor?: string | undefined }): Promise<Page<Project>> {
    const customer = await this.#deps.customers.require(tenant, customerId);
    return listProjects(this.#deps.db, this.#deps.cursors.scoped(tenant), customer.uid, query);
  }

  /**
   * Accepts a project's deletion (202): the project turns `deleting` and a
   * `project.delete` operation finalizes it; it disappears when that finishes.
   * Asking again while it is under way answers the same operation.
   */
  async delete(tenant: Tenant, customerId: string, name: string): Promise<{ project: Project; operation: Operation }> {
    const { db, customers, onOperationOpened } = this.#deps;
    const now = tenant.now;
    const result = await db.transaction().execute(async (trx) => {
      const customer = await customers.lock(trx, tenant, customerId);
      if (customer.status === 'deleting') {
        throw new ApiError('CONFLICT', `Customer ${customerId} is being deleted; its projects go with it.`, {
          details: { customer_id: customerId, status: customer.status },
        });
      }
      const project = await lockProject(trx, customer.uid, name);
      if (!project) throw notFound(`Project ${name} of customer ${customerId}`);
      if (project.state === 'provisioning') {
        throw new ApiError('NOT_READY', `Project ${name} is still provisioning; delete it once it is ready or failed.`, {
          retryAfter: customers.retryAfterS,
          details: { customer_id: customerId, project: name, state: project.state },
        });
      }
      if (project.state === 'deleting') {
        const open = await latestOperationOf(trx, customer.uid, 'project.delete', name);
        if (open) return { project: toProject(project), operation: toOperation(open) };
      }
      const updated = await setProjectState(trx, project, 'deleting', now);
      const operation = await queueOperation(trx, {
        partnerId: tenant.partnerId,
        mode: tenant.mode,
        type: 'project.delete',
        customerUid: customer.uid,
        customerId,
        project: name,
        now,
      });
      return answerWith(trx, { project: toProject(updated), operation: toOperation(operation) });
    });
    onOperationOpened();
    return result;
  }
}

function alreadyExists(customerId: string, name: string): ApiError {
  return new ApiError('ALREADY_EXISTS', `Customer ${customerId} already has a project named ${name}.`, {
    details: { field: 'name', value: name },
  });
}
