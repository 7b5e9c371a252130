import { sql } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { FailureCode } from '../platform/failures.ts';
import { OPEN_STATUSES, OPERATION_STATUS } from './status.ts';
import type { OperationRow } from './store.ts';
import type { OperationTables } from './tables.ts';

/*
 * The engine's side of the operations table: claims of due operations under a lease, their renewal and
 * release, and the outcome each look records while its claim still holds the lease. The records
 * themselves (creation, reads, lists) are in store.ts.
 */

/**
 * An open operation claimed to be looked at, with what the engine needs: its partner's test clock
 * offset (read-only), and the lease of the claim (`lease_owner`), which every write of the look's
 * outcome must still find.
 */
export type DueOperation = OperationRow & { test_clock_offset_ms: number; lease_owner: string };

/**
 * Claims up to `limit` operations that are due on their mode's clock and leased by nobody (or by a
 * process whose lease ran out): one statement, no transaction. `lease` names this claim, never an
 * earlier one: a look in flight whose lease a deletion took back finds, when it comes
 * to record, the lease of whichever claim came after it, even one made by its own process. `partner`
 * restricts the claim to one partner and mode (the test clock's catch-up).
 */
export async function claimDueOperations(
  db: Db<OperationTables>,
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
export async function hasLeasedDueOperations(
  db: Db<OperationTables>,
  partner: { id: string; mode: KeyMode },
  modeNow: Date,
  now: Date,
): Promise<boolean> {
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
export async function renewLeases(db: Db<OperationTables>, claimed: Claimed[], until: Date): Promise<void> {
  await db
    .updateTable('operations')
    .set({ lease_until: until })
    .where('id', 'in', claimIds(claimed))
    .where('lease_owner', 'in', claimLeases(claimed))
    .execute();
}

/** Gives back the leases of claims that will not be looked at (the process is stopping). */
export async function releaseLeases(db: Db<OperationTables>, claimed: Claimed[]): Promise<void> {
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
export async function releaseAllLeases(db: Db<OperationTables>): Promise<number> {
  const result = await db
    .updateTable('operations')
    .set({ lease_owner: null, lease_until: null })
    .where('lease_owner', 'is not', null)
    .where('status', 'in', OPEN_STATUSES)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** An unfinished look: the next one is due at `dueAt`; the lease is given back. False when the claim's lease was lost. */
export async function scheduleNextLook(
  db: Db<OperationTables>,
  op: DueOperation,
  next: { dueAt: Date; now: Date; problem?: string },
): Promise<boolean> {
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
interface OutcomeValues {
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
function outcomeValues(op: DueOperation, outcome: FinalOutcomeValue, now: Date): OutcomeValues {
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

/** Every operation ends through this statement, only while `a.lease` is still its own: compiled once. */
const recordOutcome = precompile((db: Db<OperationTables>, a: OutcomeValues) =>
  db.updateTable('operations').set(outcomeSet(a)).where('id', '=', a.id).where('lease_owner', '=', a.lease),
);

/**
 * Records an operation's outcome (its lease given back) in the finishing transaction, only while the
 * claim that looked still holds the operation's lease. Answers whether it did (if not, the caller
 * rolls its transaction back).
 */
export async function finishOperation(trx: Db<OperationTables>, op: DueOperation, outcome: FinalOutcomeValue, now: Date): Promise<boolean> {
  return ((await recordOutcome(trx, outcomeValues(op, outcome, now))).numAffectedRows ?? 0n) > 0n;
}
