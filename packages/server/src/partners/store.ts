import { sql } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { Page, ScopedCursors } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import type { PartnerRow, PartnerTables } from './tables.ts';

export type { PartnerRow } from './tables.ts';

export async function findPartner(db: Db<PartnerTables>, id: string): Promise<PartnerRow | undefined> {
  return db.selectFrom('partners').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * Another partner whose customer prefix overlaps this one: equal, or extending it or extended by it with
 * a dash. `<a>-<id>` and `<b>-<id'>` can be equal exactly when `a-` begins `b-` or the other way round;
 * without a dash at the join they never meet (`acmex-…` and `acmexx-…` differ at the sixth character).
 */
export async function findClashingPrefix(db: Db<PartnerTables>, prefix: string, exceptPartnerId?: string): Promise<PartnerRow | undefined> {
  return db
    .selectFrom('partners')
    .selectAll()
    .where((eb) =>
      eb.or([
        eb('customer_prefix', '=', prefix),
        // Prefixes are DNS labels ([a-z0-9-]): no LIKE wildcard can be in one.
        eb(eb.val(prefix), 'like', sql<string>`customer_prefix || '-%'`),
        eb('customer_prefix', 'like', `${prefix}-%`),
      ]),
    )
    .$if(exceptPartnerId !== undefined, (q) => q.where('id', '<>', exceptPartnerId as string))
    .executeTakeFirst();
}

/** Reads the row under a lock, for a change in the same transaction. */
export async function findPartnerForUpdate(trx: Db<PartnerTables>, id: string): Promise<PartnerRow | undefined> {
  return trx.selectFrom('partners').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
}

export async function insertPartner(trx: Db<PartnerTables>, row: PartnerRow): Promise<boolean> {
  const result = await trx
    .insertInto('partners')
    .values(row)
    .onConflict((oc) => oc.column('id').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
}

export async function updatePartner(trx: Db<PartnerTables>, id: string, changes: Partial<PartnerRow>): Promise<PartnerRow> {
  return trx.updateTable('partners').set(changes).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export async function listPartners<T>(
  db: Db<PartnerTables>,
  cursors: ScopedCursors,
  query: { limit: number; cursor?: string | undefined },
  toItem: (row: PartnerRow) => T,
): Promise<Page<T>> {
  let select = db
    .selectFrom('partners')
    .selectAll()
    .orderBy('id')
    .limit(query.limit + 1);
  if (query.cursor !== undefined) {
    const [lastId] = cursors.decode(query.cursor, 'partners', {});
    select = select.where('id', '>', String(lastId));
  }
  const rows = await select.execute();
  return toPage(rows, query.limit, toItem, (last) => cursors.encode('partners', {}, [last.id]));
}

/** A partner's customer count of one mode (live and test customers are counted apart). */
export async function adjustCustomerCount(trx: Db<PartnerTables>, partnerId: string, mode: KeyMode, delta: number): Promise<void> {
  await trx
    .updateTable('partners')
    .set((eb) =>
      mode === 'live'
        ? { customer_count: eb('customer_count', '+', delta) }
        : { test_customer_count: eb('test_customer_count', '+', delta) },
    )
    .where('id', '=', partnerId)
    .execute();
}

/**
 * Moves the partner's test clock forward, never past `maxMs` ahead of real time: advances that race
 * are each checked against the offset before either moves it, so only the update itself can hold the
 * bound. The new offset.
 */
export async function advanceTestClock(db: Db<PartnerTables>, partnerId: string, ms: number, maxMs: number): Promise<number> {
  const row = await db
    .updateTable('partners')
    .set({ test_clock_offset_ms: sql<number>`least(test_clock_offset_ms + ${ms}, ${maxMs})` })
    .where('id', '=', partnerId)
    .returning('test_clock_offset_ms')
    .executeTakeFirstOrThrow();
  return Number(row.test_clock_offset_ms);
}

/** Puts the partner's test clock back on real time. */
export async function resetTestClock(db: Db<PartnerTables>, partnerId: string): Promise<void> {
  await db.updateTable('partners').set({ test_clock_offset_ms: 0 }).where('id', '=', partnerId).execute();
}
