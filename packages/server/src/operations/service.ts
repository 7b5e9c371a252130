import type { CustomerService } from '../customers/service.ts';
import type { Db } from '../infra/db/database.ts';
import { notFound } from '../infra/errors/catalogue.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import type { Tenant } from '../platform/tenant.ts';
import type { OperationEngine } from './engine.ts';
import { type Operation, toOperation } from './schemas.ts';
import { findCustomerOperation, listCustomerOperations, OPERATION_RETENTION_MS } from './store.ts';

export interface OperationServiceDeps {
  db: Db;
  cursors: CursorCodec;
  customers: CustomerService;
  engine: OperationEngine;
}

/**
 * Reading operations. partner-api.md: "Reading a page of operations also
 * advances the provisioning of the operations on that page", so a partner
 * polling (or a test that advanced its clock) sees progress without waiting
 * for the background engine.
 */
export class OperationService {
  readonly #deps: OperationServiceDeps;

  constructor(deps: OperationServiceDeps) {
    this.#deps = deps;
  }

  async list(tenant: Tenant, customerId: string, query: { limit: number; cursor?: string | undefined }): Promise<Page<Operation>> {
    const { db, cursors, customers, engine } = this.#deps;
    const customer = await customers.require(tenant, customerId);
    const since = new Date(tenant.now.getTime() - OPERATION_RETENTION_MS);
    const first = await listCustomerOperations(db, cursors, customer.uid, query, since);
    const due = first.rows.filter((row) => isOpen(row) && row.due_at <= tenant.now);
    if (due.length === 0) return first.page;
    // Whether this read or the background engine moved them, the page shows where they are now.
    await engine.advanceOpen(due);
    return (await listCustomerOperations(db, cursors, customer.uid, query, since)).page;
  }

  async get(tenant: Tenant, customerId: string, id: string): Promise<Operation> {
    const { db, customers, engine } = this.#deps;
    const customer = await customers.require(tenant, customerId);
    const since = new Date(tenant.now.getTime() - OPERATION_RETENTION_MS);
    let row = await findCustomerOperation(db, customer.uid, id, since);
    if (!row) throw notFound(`Operation ${id} of customer ${customerId}`);
    if (isOpen(row) && row.due_at <= tenant.now) {
      await engine.advanceOpen([row]);
      row = (await findCustomerOperation(db, customer.uid, id, since)) ?? row;
    }
    return toOperation(row);
  }
}

const isOpen = (row: { status: string }) => row.status === 'pending' || row.status === 'running';
