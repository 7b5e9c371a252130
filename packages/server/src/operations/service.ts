import type { Tenant } from '../auth/tenant.ts';
import type { Db } from '../infra/db/handle.ts';
import { notFound } from '../infra/errors/catalogue.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import type { OperationEngine } from './engine.ts';
import { type Operation, toOperation } from './schemas.ts';
import { isOpen } from './status.ts';
import {
  assertOperationSlotFree,
  countOpenOperations,
  deleteExpiredOperations,
  expediteCustomerOperations,
  findCustomerOperation,
  insertOperation,
  latestCustomerUidWithOperations,
  latestOperation,
  listCustomerOperations,
  listStuckOperations,
  type NewOperation,
  newOperationRow,
  nextDueAt,
  OPERATION_RETENTION_MS,
  type OperationRow,
  openOperationsByType,
  operationInsert,
} from './store.ts';
import type { OperationTables, OperationType } from './tables.ts';

/**
 * Queues an operation in the caller's transaction, the one that makes the change it carries out: the
 * change and its operation commit together. The caller wakes the engine once it has committed.
 */
export function queueOperation(trx: Db<OperationTables>, op: NewOperation): Promise<OperationRow> {
  return insertOperation(trx, op);
}

/** A new operation's row, for a change that queues a batch of them with `queueOperations`. */
export function newOperation(op: NewOperation): OperationRow {
  return newOperationRow(op);
}

/** Queues a batch of operations (`newOperation`) in the caller's transaction, in one insert. */
export async function queueOperations(trx: Db<OperationTables>, rows: readonly OperationRow[]): Promise<void> {
  await operationInsert(trx, rows).execute();
}

/**
 * The partner's operation slots for a batch of changes, each taking one (`take`) or refused with
 * TOO_MANY_OPERATIONS: the open operations are counted once, with the partner's row locked by the
 * caller's transaction, and each change taken counts for the ones after it.
 */
export async function operationSlots(
  trx: Db<OperationTables>,
  owner: { partnerId: string; mode: KeyMode },
  max: number,
  batch: number,
  retryAfterS: () => number,
): Promise<{ take(): void }> {
  let open = await countOpenOperations(trx, owner.partnerId, owner.mode, max + batch);
  return {
    take() {
      assertOperationSlotFree(open, max, retryAfterS());
      open++;
    },
  };
}

/**
 * TOO_MANY_OPERATIONS (partner-api.md, Behaviour 6) when the partner already has `max` provisioning
 * operations open in this mode: asked with the partner's row locked by the caller's transaction, so
 * concurrent requests cannot both take the last slot.
 */
export async function requireOperationSlot(
  trx: Db<OperationTables>,
  owner: { partnerId: string; mode: KeyMode },
  max: number,
  retryAfterS: number,
): Promise<void> {
  assertOperationSlotFree(await countOpenOperations(trx, owner.partnerId, owner.mode, max), max, retryAfterS);
}

/** The latest operation of a kind for a customer (and project): what a repeated delete answers. */
export function latestOperationOf(
  db: Db<OperationTables>,
  customerUid: string,
  type: OperationType,
  project: string | null = null,
): Promise<OperationRow | undefined> {
  return latestOperation(db, customerUid, type, project);
}

/**
 * The customer's open operations are looked at now, in the caller's transaction (the customer is
 * being deleted: they end with CUSTOMER_DELETING).
 */
export function expediteOperationsOf(trx: Db<OperationTables>, customerUid: string, now: Date): Promise<void> {
  return expediteCustomerOperations(trx, customerUid, now);
}

/** When the partner's next open operation of a mode falls due (the test clock walks through them in order). */
export function nextOperationDueAt(db: Db<OperationTables>, partner: { id: string; mode: KeyMode }): Promise<Date | undefined> {
  return nextDueAt(db, partner);
}

/** What reading operations asks of the customers module: the partner's live customer of an id, if any. */
interface Customers {
  find(tenant: Tenant, id: string): Promise<{ uid: string } | undefined>;
}

export interface OperationServiceDeps {
  db: Db<OperationTables>;
  cursors: CursorCodec;
  customers: Customers;
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

  /** Open operations by type, and when the oldest open live-mode one was created (the metrics' gauges). */
  async openSummary(): Promise<{ byType: { type: OperationType; open: number }[]; oldestLive: Date | null }> {
    const rows = await openOperationsByType(this.#deps.db);
    const oldest = rows.reduce<Date | null>(
      (min, row) => (row.oldest_live && (!min || row.oldest_live < min) ? row.oldest_live : min),
      null,
    );
    return { byType: rows.map(({ type, open }) => ({ type, open })), oldestLive: oldest };
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
