import type { Tenant } from '../auth/tenant.ts';
import type { CustomerService } from '../customers/service.ts';
import type { Db } from '../infra/db/handle.ts';
import { notFound } from '../infra/errors/catalogue.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import type { OperationEngine } from './engine.ts';
import { type Operation, toOperation } from './schemas.ts';
import { isOpen } from './status.ts';
import {
  deleteExpiredOperations,
  findCustomerOperation,
  latestCustomerUidWithOperations,
  listCustomerOperations,
  listStuckOperations,
  OPERATION_RETENTION_MS,
  type OperationRow,
} from './store.ts';
import type { OperationTables } from './tables.ts';

export interface OperationServiceDeps {
  db: Db<OperationTables>;
  cursors: CursorCodec;
  customers: CustomerService;
  engine: OperationEngine;
}

/**
 * Reading operations: always from the database, never platform work. partner-api.md says that
 * reading a page of operations also advances them; here a read that finds due operations wakes
 * the engine (which looks at them at once, in the background), so a partner polling every 100 ms
 * drives no platform calls of its own. A deleted customer's operations stay readable by its id for
 * their 7 days (the outcome of its `customer.delete` included).
 */
export class OperationService {
  readonly #deps: OperationServiceDeps;

  constructor(deps: OperationServiceDeps) {
    this.#deps = deps;
  }

  /** Drops finished operations past their retention (7 days); answers how many. */
  deleteExpired(now: Date): Promise<number> {
    return deleteExpiredOperations(this.#deps.db, now);
  }

  /** Operations whose looks keep failing (at least `minFailedLooks` in a row), for the operator. */
  stuck(minFailedLooks: number, limit: number): Promise<OperationRow[]> {
    return listStuckOperations(this.#deps.db, minFailedLooks, limit);
  }

  async list(tenant: Tenant, customerId: string, query: { limit: number; cursor?: string | undefined }): Promise<Page<Operation>> {
    const { db, cursors, engine } = this.#deps;
    const since = new Date(tenant.now.getTime() - OPERATION_RETENTION_MS);
    const page = await listCustomerOperations(db, cursors.scoped(tenant), await this.#customerUid(tenant, customerId, since), query, since);
    if (page.data.some((op) => isOpen(op.status))) engine.kick();
    return page;
  }

  async get(tenant: Tenant, customerId: string, id: string): Promise<Operation> {
    const { db, engine } = this.#deps;
    const since = new Date(tenant.now.getTime() - OPERATION_RETENTION_MS);
    const row = await findCustomerOperation(db, await this.#customerUid(tenant, customerId, since), id, since);
    if (!row) throw notFound(`Operation ${id} of customer ${customerId}`);
    if (isOpen(row.status)) engine.kick();
    return toOperation(row);
  }

  /** The customer whose operations a partner reads: the live one of this id, else the latest deleted one still on record. */
  async #customerUid(tenant: Tenant, customerId: string, since: Date): Promise<string> {
    const customer = await this.#deps.customers.find(tenant, customerId);
    if (customer) return customer.uid;
    const deleted = await latestCustomerUidWithOperations(this.#deps.db, tenant, customerId, since);
    if (!deleted) throw notFound(`Customer ${customerId}`);
    return deleted;
  }
}
