import type { Selectable } from 'kysely';
import type { Db } from '../infra/db/database.ts';
import type { PartnersTable } from '../infra/db/schema.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';

export type PartnerRow = Selectable<PartnersTable>;

export async function findPartner(db: Db, id: string): Promise<PartnerRow | undefined> {
  return db.selectFrom('partners').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Reads the row under a lock, for a change in the same transaction. */
export async function findPartnerForUpdate(trx: Db, id: string): Promise<PartnerRow | undefined> {
  return trx.selectFrom('partners').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
}

export async function insertPartner(trx: Db, row: PartnerRow): Promise<boolean> {
  const result = await trx
    .insertInto('partners')
    .values(row)
    .onConflict((oc) => oc.column('id').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
}

export async function updatePartner(trx: Db, id: string, changes: Partial<PartnerRow>): Promise<PartnerRow> {
  return trx.updateTable('partners').set(changes).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export async function listPartners<T>(
  db: Db,
  cursors: CursorCodec,
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
