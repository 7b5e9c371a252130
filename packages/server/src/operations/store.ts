import { type QueryCreator, sql } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import { newId } from '../infra/ids.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { Page, ScopedCursors } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import { tracing } from '../infra/telemetry/tracing.ts';
import { type Operation, toOperation } from './schemas.ts';
import { OPEN_STATUSES } from './status.ts';
import type { OperationRow, OperationTables, OperationType } from './tables.ts';

export type { OperationRow } from './tables.ts';

/** partner-api.md, Limits: operation records are kept 7 days. */
export const OPERATION_RETENTION_MS = 7 * 24 * 3600 * 1000;

export type NewOperation = {
  partnerId: string;
  mode: KeyMode;
  type: OperationType;
  customerUid: string;
  customerId: string;
  project: string | null;
  now: Date;
};

export async function insertOperation(trx: Db<OperationTables>, op: NewOperation): Promise<OperationRow> {
  const row = newOperationRow(op);
  await operationInsert(trx, row).execute();
  return row;
}

/** A new pending operation's row, due at once. */
export function newOperationRow(op: NewOperation): OperationRow {
  return {
    id: newId('operation'),
    partner_id: op.partnerId,
    mode: op.mode,
    type: op.type,
    status: 'pending',
    customer_uid: op.customerUid,
    customer_id: op.customerId,
    project: op.project,
    created_at: op.now,
    updated_at: op.now,
    finished_at: null,
    error_code: null,
    error_message: null,
    due_at: op.now,
    lease_owner: null,
    lease_until: null,
    failed_looks: 0,
    last_problem: null,
    // The request being answered (its span), so the looks that carry this out, in any process, link to it.
    trace_parent: tracing().traceparent(),
  };
}

/** Operations' insert: one alone, or a batch of creations'. */
export function operationInsert(qc: QueryCreator<OperationTables>, rows: OperationRow | readonly OperationRow[]) {
  return qc.insertInto('operations').values(rows);
}

/**
 * The partner's provisioning operations open in this mode, counted up to `upTo` (the answer to a limit
 * is the same beyond it, and a long queue costs no more to check): asked under the partner's lock.
 */
export async function countOpenOperations(db: Db<OperationTables>, partnerId: string, mode: KeyMode, upTo: number): Promise<number> {
  const { open } = await db
    .selectFrom((inner) =>
      inner
        .selectFrom('operations')
        .select(sql<number>`1`.as('one'))
        .where('partner_id', '=', partnerId)
        .where('mode', '=', mode)
        // Literal, not bound: the partial index on open operations matches only its own predicate.
        .where(sql<boolean>`status in ('pending', 'running')`)
        .limit(upTo)
        .as('open_operations'),
    )
    .select(sql<number>`count(*)::int`.as('open'))
    .executeTakeFirstOrThrow();
  return Number(open ?? 0);
}

/**
 * TOO_MANY_OPERATIONS (partner-api.md, Behaviour 6) when the partner already has `max` provisioning
 * operations open in this mode besides the new one: `open`, counted by `countOpenOperations` with the
 * partner row locked, so concurrent requests cannot both take the last slot.
 */
export function assertOperationSlotFree(open: number, max: number, retryAfterS: number): void {
  if (open >= max) {
    throw new ApiError('TOO_MANY_OPERATIONS', `${open} provisioning operations are in flight; the limit is ${max}.`, {
      retryAfter: retryAfterS,
      details: { open, max },
    });
  }
}

export async function findCustomerOperation(
  db: Db<OperationTables>,
  customerUid: string,
  id: string,
  since: Date,
): Promise<OperationRow | undefined> {
  return db
    .selectFrom('operations')
    .selectAll()
    .where('customer_uid', '=', customerUid)
    .where('id', '=', id)
    .where('created_at', '>=', since)
    .executeTakeFirst();
}

/** A customer's operations of the last 7 days, newest first; the cursor names the last id returned. */
export async function listCustomerOperations(
  db: Db<OperationTables>,
  cursors: ScopedCursors,
  customerUid: string,
  query: { limit: number; cursor?: string | undefined },
  since: Date,
): Promise<Page<Operation>> {
  let select = db
    .selectFrom('operations')
    .selectAll()
    .where('customer_uid', '=', customerUid)
    .where('created_at', '>=', since)
    .orderBy('id', 'desc')
    .limit(query.limit + 1);
  if (query.cursor !== undefined) {
    const [lastId] = cursors.decode(query.cursor, 'customer-operations', { customer: customerUid });
    select = select.where('id', '<', String(lastId));
  }
  const rows = await select.execute();
  return toPage(rows, query.limit, toOperation, (last) => cursors.encode('customer-operations', { customer: customerUid }, [last.id]));
}

/**
 * The internal identity of the latest customer of this id whose operations are still kept: a
 * deleted customer's operations (its `customer.delete` outcome included) stay readable by its id.
 */
export async function latestCustomerUidWithOperations(
  db: Db<OperationTables>,
  owner: { partnerId: string; mode: KeyMode },
  customerId: string,
  since: Date,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('operations')
    .select('customer_uid')
    .where('partner_id', '=', owner.partnerId)
    .where('mode', '=', owner.mode)
    .where('customer_id', '=', customerId)
    .where('created_at', '>=', since)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.customer_uid;
}

/** The latest operation of a kind for a customer (and project): what a repeated delete answers. */
export async function latestOperation(db: Db<OperationTables>, customerUid: string, type: OperationType, project: string | null = null) {
  return db
    .selectFrom('operations')
    .selectAll()
    .where('customer_uid', '=', customerUid)
    .where('type', '=', type)
    .$if(project !== null, (q) => q.where('project', '=', project))
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/**
 * Open operations of one customer are looked at now (the customer is being deleted: they end with
 * CUSTOMER_DELETING). A look in flight loses its lease: what it found is out of date, so its outcome
 * is not recorded, and the next look sees the deletion.
 */
export async function expediteCustomerOperations(trx: Db<OperationTables>, customerUid: string, now: Date): Promise<void> {
  await trx
    .updateTable('operations')
    .set({ due_at: now, lease_owner: null, lease_until: null })
    .where('customer_uid', '=', customerUid)
    .where('status', 'in', OPEN_STATUSES)
    .execute();
}

/** Open operations whose looks keep failing (the platform does not answer, or a step throws): the operator's view. */
export async function listStuckOperations(db: Db<OperationTables>, minFailedLooks: number, limit: number): Promise<OperationRow[]> {
  return db
    .selectFrom('operations')
    .selectAll()
    .where('status', 'in', OPEN_STATUSES)
    .where('failed_looks', '>=', minFailedLooks)
    .orderBy('failed_looks', 'desc')
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** The earliest due time among a partner's open operations of a mode (the test clock walks through them in order). */
export async function nextDueAt(db: Db<OperationTables>, partner: { id: string; mode: KeyMode }): Promise<Date | undefined> {
  const row = await db
    .selectFrom('operations')
    .select((eb) => eb.fn.min('due_at').as('due_at'))
    .where('partner_id', '=', partner.id)
    .where('mode', '=', partner.mode)
    .where('status', 'in', OPEN_STATUSES)
    .executeTakeFirst();
  return row?.due_at ? new Date(row.due_at as unknown as string | Date) : undefined;
}

/**
 * Open operations by type, with the creation of each type's oldest open live-mode one (test mode's
 * times are on partners' test clocks): one walk of the open operations' partial index.
 */
export async function openOperationsByType(
  db: Db<OperationTables>,
): Promise<{ type: OperationType; open: number; oldest_live: Date | null }[]> {
  const result = await sql<{ type: OperationType; open: number; oldest_live: Date | null }>`
    select type, count(*)::int as open, min(created_at) filter (where mode = 'live') as oldest_live
    from operations where status in ('pending', 'running') group by type`.execute(db);
  return result.rows;
}

export async function deleteExpiredOperations(db: Db<OperationTables>, now: Date): Promise<number> {
  const result = await db
    .deleteFrom('operations')
    .where('finished_at', '<', new Date(now.getTime() - OPERATION_RETENTION_MS))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
