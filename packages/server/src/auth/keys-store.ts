import type { Selectable } from 'kysely';
import type { Db } from '../infra/db/database.ts';
import type { ApiKeysTable } from '../infra/db/schema.ts';

export type ApiKeyRow = Selectable<ApiKeysTable>;

export async function findKey(db: Db, kid: string): Promise<ApiKeyRow | undefined> {
  return db.selectFrom('api_keys').selectAll().where('kid', '=', kid).executeTakeFirst();
}

export async function insertKey(trx: Db, row: ApiKeyRow): Promise<void> {
  await trx.insertInto('api_keys').values(row).execute();
}

export async function listKeys(db: Db, partnerId: string): Promise<ApiKeyRow[]> {
  return db.selectFrom('api_keys').selectAll().where('partner_id', '=', partnerId).orderBy('created_at').orderBy('kid').execute();
}

export async function revokeKey(trx: Db, partnerId: string, kid: string, at: Date): Promise<ApiKeyRow | undefined> {
  return trx
    .updateTable('api_keys')
    .set({ revoked_at: at })
    .where('partner_id', '=', partnerId)
    .where('kid', '=', kid)
    .where('revoked_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

export async function touchKey(db: Db, kid: string, at: Date): Promise<void> {
  await db.updateTable('api_keys').set({ last_used_at: at }).where('kid', '=', kid).execute();
}
