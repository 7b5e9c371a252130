import { type Selectable, sql } from 'kysely';
import type { Db } from '../infra/db/database.ts';
import type { KeyMode, OperationsTable, OperationType } from '../infra/db/schema.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import { newId } from '../infra/ids.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import { type Operation, toOperation } from './schemas.ts';

export type OperationRow = Selectable<OperationsTable>;

/** partner-api.md, Limits: operation records are kept 7 days. */
export const OPERATION_RETENTION_MS = 7 * 24 * 3600 * 1000;
const OPEN = ['pending', 'running'] as const;

export async function insertOperation(
  trx: Db,
  op: { partnerId: string; mode: KeyMode; type: OperationType; customerUid: string; customerId: string; project: string | null; now: Date },
): Promise<OperationRow> {
  const row: OperationRow = {
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
  };
  await trx.insertInto('operations').values(row).execute();
  return row;
}

/**
 * TOO_MANY_OPERATIONS (partner-api.md, Behaviour 6) when the partner already
 * has `max` provisioning operations open in this mode. Call it with the
 * partner row locked, so concurrent requests cannot both take the last slot.
 */
export async function assertOperationSlot(trx: Db, partnerId: string, mode: KeyMode, max: number, retryAfterS: number): Promise<void> {
  // Counting stops at `max`: the answer is the same, and a long queue costs no more to check.
  const result = await sql<{ open: number }>`
    select count(*)::int as open from (
      select 1 from operations
      where partner_id = ${partnerId} and mode = ${mode} and status in ('pending', 'running')
      limit ${max}) as open_operations`.execute(trx);
  const open = Number(result.rows[0]?.open ?? 0);
  if (open >= max) {
    throw new ApiError('TOO_MANY_OPERATIONS', `${open} provisioning operations are in flight; the limit is ${max}.`, {
      retryAfter: retryAfterS,
      details: { open, max },
    });
  }
}

export async function findCustomerOperation(db: Db, customerUid: string, id: string, since: Date): Promise<OperationRow | undefined> {
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
  db: Db,
  cursors: CursorCodec,
  customerUid: string,
  query: { limit: number; cursor?: string | undefined },
  since: Date,
): Promise<{ rows: OperationRow[]; page: Page<Operation> }> {
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
  const page = toPage(rows, query.limit, toOperation, (last) =>
    cursors.encode('customer-operations', { customer: customerUid }, [last.id]),
  );
  return { rows: rows.slice(0, query.limit), page };
}

/** Open operations of one customer (to hurry them along when the customer is being deleted). */
export async function expediteCustomerOperations(trx: Db, customerUid: string, now: Date): Promise<void> {
  await trx.updateTable('operations').set({ due_at: now }).where('customer_uid', '=', customerUid).where('status', 'in', OPEN).execute();
}

export async function deleteExpiredOperations(db: Db, now: Date): Promise<number> {
  const result = await db
    .deleteFrom('operations')
    .where('finished_at', '<', new Date(now.getTime() - OPERATION_RETENTION_MS))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
