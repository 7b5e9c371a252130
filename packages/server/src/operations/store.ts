import { type Expression, type ExpressionBuilder, type QueryCreator, type Selectable, type SqlBool, sql } from 'kysely';
import type { Database, Db } from '../app/database.ts';
import { announceRecordedEvent, boundEventInsert, type EventValues, eventValues, type NewEvent } from '../events/store.ts';
import { precompile } from '../infra/db/precompiled.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import { newId } from '../infra/ids.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { Page, ScopedCursors } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import type { FailureCode } from '../platform/failures.ts';
import { type Operation, toOperation } from './schemas.ts';
import { OPEN_STATUSES, OPERATION_STATUS } from './status.ts';
import type { OperationsTable, OperationType } from './tables.ts';

export type OperationRow = Selectable<OperationsTable>;

/** partner-api.md, Limits: operation records are kept 7 days. */
export const OPERATION_RETENTION_MS = 7 * 24 * 3600 * 1000;

type NewOperation = {
  partnerId: string;
  mode: KeyMode;
  type: OperationType;
  customerUid: string;
  customerId: string;
  project: string | null;
  now: Date;
};

export async function insertOperation(trx: Db, op: NewOperation): Promise<OperationRow> {
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
  };
}

/** The operation's insert, to run alone or as a part of a create's one statement (decision 223). */
export function operationInsert(qc: QueryCreator<Database>, rows: OperationRow | readonly OperationRow[]) {
  return qc.insertInto('operations').values(rows);
}

/**
 * The partner's provisioning operations open in this mode, counted up to `upTo` (the answer to a limit
 * is the same beyond it, and a long queue costs no more to check), as a subquery: a create asks it in
 * one statement with its other checks, under the partner's lock (decision 223).
 */
export function openOperationCount(eb: ExpressionBuilder<Database, never>, partnerId: string, mode: KeyMode, upTo: number) {
  return eb
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
    .select(sql<number>`count(*)::int`.as('open'));
}

/**
 * TOO_MANY_OPERATIONS (partner-api.md, Behaviour 6) when the partner already has `max` provisioning
 * operations open in this mode besides the new one: `open`, counted by `openOperationCount` with the
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
  db: Db,
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
export async function latestOperation(db: Db, customerUid: string, type: OperationType, project: string | null = null) {
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
export async function expediteCustomerOperations(trx: Db, customerUid: string, now: Date): Promise<void> {
  await trx
    .updateTable('operations')
    .set({ due_at: now, lease_owner: null, lease_until: null })
    .where('customer_uid', '=', customerUid)
    .where('status', 'in', OPEN_STATUSES)
    .execute();
}

/**
 * An open operation claimed to be looked at, with what the engine needs: its partner's test clock
 * offset (read-only), and the lease of the claim (`lease_owner`), which every write of the look's
 * outcome must still find.
 */
export type DueOperation = OperationRow & { test_clock_offset_ms: number; lease_owner: string };

/**
 * Claims up to `limit` operations that are due on their mode's clock and leased by nobody (or by a
 * process whose lease ran out): one statement, no transaction. `lease` names this claim, never an
 * earlier one (decision 264): a look in flight whose lease a deletion took back finds, when it comes
 * to record, the lease of whichever claim came after it, even one made by its own process. `partner`
 * restricts the claim to one partner and mode (the test clock's catch-up).
 */
export async function claimDueOperations(
  db: Db,
  claim: { lease: string; now: Date; leaseUntil: Date; limit: number; partner?: { id: string; mode: KeyMode } },
): Promise<DueOperation[]> {
  const { lease, now, leaseUntil, limit, partner } = claim;
  const result = await sql<DueOperation>`
    with due as (
      select o.id from operations o join partners p on p.id = o.partner_id
      where o.status in ('pending', 'running')
        and o.due_at <= ${now}::timestamptz + (case when o.mode = 'test' then p.test_clock_offset_ms else 0 end) * interval '1 millisecond'
        and (o.lease_until is null or o.lease_until <= ${now})
        ${partner ? sql`and o.partner_id = ${partner.id} and o.mode = ${partner.mode}` : sql``}
      order by o.due_at
      limit ${limit}
      for update of o skip locked)
    update operations o set lease_owner = ${lease}, lease_until = ${leaseUntil}
    from due, partners p
    where o.id = due.id and p.id = o.partner_id
    returning o.*, p.test_clock_offset_ms::bigint as test_clock_offset_ms`.execute(db);
  return result.rows.map((row) => ({ ...row, test_clock_offset_ms: Number(row.test_clock_offset_ms) }));
}

/** Whether a partner's mode still has due operations that some process holds (the catch-up waits for them). */
export async function hasLeasedDueOperations(db: Db, partner: { id: string; mode: KeyMode }, modeNow: Date, now: Date): Promise<boolean> {
  const row = await db
    .selectFrom('operations')
    .select('id')
    .where('partner_id', '=', partner.id)
    .where('mode', '=', partner.mode)
    .where('status', 'in', OPEN_STATUSES)
    .where('due_at', '<=', modeNow)
    .where('lease_until', '>', now)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** A claimed operation and the lease its claim holds. */
type Claimed = Pick<DueOperation, 'id' | 'lease_owner'>;
const claimIds = (claimed: Claimed[]) => claimed.map((op) => op.id);
const claimLeases = (claimed: Claimed[]) => [...new Set(claimed.map((op) => op.lease_owner))];

/**
 * Extends the leases of claims still held, matched by operation and lease: an operation a later claim
 * took over is renewed only when that claim is among them.
 */
export async function renewLeases(db: Db, claimed: Claimed[], until: Date): Promise<void> {
  await db
    .updateTable('operations')
    .set({ lease_until: until })
    .where('id', 'in', claimIds(claimed))
    .where('lease_owner', 'in', claimLeases(claimed))
    .execute();
}

/** Gives back the leases of claims that will not be looked at (the process is stopping). */
export async function releaseLeases(db: Db, claimed: Claimed[]): Promise<void> {
  await db
    .updateTable('operations')
    .set({ lease_owner: null, lease_until: null })
    .where('id', 'in', claimIds(claimed))
    .where('lease_owner', 'in', claimLeases(claimed))
    .execute();
}

/**
 * Gives back every lease (a process that alone opens the database starts: whoever held them is gone).
 * Answers how many there were.
 */
export async function releaseAllLeases(db: Db): Promise<number> {
  const result = await db
    .updateTable('operations')
    .set({ lease_owner: null, lease_until: null })
    .where('lease_owner', 'is not', null)
    .where('status', 'in', OPEN_STATUSES)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** An unfinished look: the next one is due at `dueAt`; the lease is given back. False when the claim's lease was lost. */
export async function scheduleNextLook(db: Db, op: DueOperation, next: { dueAt: Date; now: Date; problem?: string }): Promise<boolean> {
  const status = op.status === 'pending' ? OPERATION_STATUS.move('pending', 'running') : op.status;
  const result = await db
    .updateTable('operations')
    .set((eb) => ({
      status,
      due_at: next.dueAt,
      updated_at: op.status === 'pending' ? next.now : op.updated_at,
      lease_owner: null,
      lease_until: null,
      failed_looks: next.problem === undefined ? 0 : eb('failed_looks', '+', 1),
      last_problem: next.problem ?? null,
    }))
    .where('id', '=', op.id)
    .where('lease_owner', '=', op.lease_owner)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** What an operation's outcome writes, as bound values. */
export interface OutcomeValues {
  id: string;
  /** The lease of the claim whose look found the outcome. */
  lease: string;
  status: OperationRow['status'];
  now: Date;
  errorCode: FailureCode | null;
  errorMessage: string | null;
}

const outcomeSet = (a: OutcomeValues) => ({
  status: a.status,
  updated_at: a.now,
  finished_at: a.now,
  error_code: a.errorCode,
  error_message: a.errorMessage,
  lease_owner: null,
  lease_until: null,
  last_problem: null,
});

/** The values `outcome` writes on `op`, while its claim still holds the lease. */
export function outcomeValues(op: DueOperation, outcome: FinalOutcomeValue, now: Date): OutcomeValues {
  const failed = outcome.state === 'failed' ? outcome : undefined;
  return {
    id: op.id,
    lease: op.lease_owner,
    status: OPERATION_STATUS.move(op.status, failed ? 'failed' : 'succeeded'),
    now,
    errorCode: failed?.code ?? null,
    errorMessage: failed?.message ?? null,
  };
}

type FinalOutcomeValue = { state: 'done' } | { state: 'failed'; code: FailureCode; message: string };

/**
 * The update that records an operation's outcome and gives its lease back, only while `a.lease` is
 * still the operation's: a builder, for `finishOperation` and for a handler whose outcome is recorded in one
 * statement with the changes it makes (`OperationHandler.finishAlone`, decision 240).
 */
export function outcomeUpdate(qc: QueryCreator<Database>, a: OutcomeValues) {
  return qc.updateTable('operations').set(outcomeSet(a)).where('id', '=', a.id).where('lease_owner', '=', a.lease);
}

/** Every operation ends through one of these two statements (or a handler's own, built on `outcomeUpdate`): compiled once (decision 233). */
const recordOutcome = precompile((db: Db, a: OutcomeValues) => outcomeUpdate(db, a));
const recordOutcomeWithEvent = precompile((db: Db, a: OutcomeValues & EventValues) =>
  db
    .with('event', (qc) => boundEventInsert(qc, a))
    .updateTable('operations')
    .set(outcomeSet(a))
    .where('id', '=', a.id)
    .where('lease_owner', '=', a.lease)
    .returning((eb) => eb.selectFrom('event').select('delivery_state').as('delivery_state')),
);

/** SQLSTATE of `operation_outcome_whole` (migration 0037): a one-statement outcome that would have been partial. */
const NOT_WHOLE = 'TN001';

/**
 * True when the statement's outcome was recorded whole; otherwise the statement fails with
 * `NOT_WHOLE` and nothing it wrote stays. For a statement that writes an outcome with the changes it
 * announces and must not commit some without the others (the lease was lost, a row it settles was no
 * longer as expected): its own transaction, without a round trip to open one and one to close it.
 * A function: PostgreSQL may evaluate a constant expression at planning, but never a volatile call.
 */
export function outcomeWhole(recorded: Expression<SqlBool>, operationId: string) {
  return sql<boolean>`operation_outcome_whole(${recorded}, ${operationId})`;
}

/** The statement failed in `outcomeWhole`'s guard: it wrote nothing. */
export function isOutcomeNotWhole(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === NOT_WHOLE;
}

/**
 * Records an operation's outcome (its lease given back), and the event announcing it when there is
 * one, in one statement of the finishing transaction (decision 223), only while the claim that looked
 * still holds the operation's lease. Answers whether it did (if not, the caller rolls its transaction
 * back: the event was written by the same statement).
 */
export async function finishOperation(
  trx: Db,
  op: DueOperation,
  outcome: FinalOutcomeValue,
  now: Date,
  event?: NewEvent,
): Promise<boolean> {
  const values = outcomeValues(op, outcome, now);
  if (!event) return ((await recordOutcome(trx, values)).numAffectedRows ?? 0n) > 0n;
  const [finished] = (await recordOutcomeWithEvent(trx, { ...values, ...eventValues(event) })).rows;
  if (!finished) return false;
  announceRecordedEvent(finished.delivery_state);
  return true;
}

/** Open operations whose looks keep failing (the platform does not answer, or a step throws): the operator's view. */
export async function listStuckOperations(db: Db, minFailedLooks: number, limit: number): Promise<OperationRow[]> {
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
export async function nextDueAt(db: Db, partner: { id: string; mode: KeyMode }): Promise<Date | undefined> {
  const row = await db
    .selectFrom('operations')
    .select((eb) => eb.fn.min('due_at').as('due_at'))
    .where('partner_id', '=', partner.id)
    .where('mode', '=', partner.mode)
    .where('status', 'in', OPEN_STATUSES)
    .executeTakeFirst();
  return row?.due_at ? new Date(row.due_at as unknown as string | Date) : undefined;
}

export async function deleteExpiredOperations(db: Db, now: Date): Promise<number> {
  const result = await db
    .deleteFrom('operations')
    .where('finished_at', '<', new Date(now.getTime() - OPERATION_RETENTION_MS))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
