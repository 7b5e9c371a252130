import type { Selectable } from 'kysely';
import type { Db } from '../app/database.ts';
import { precompile } from '../infra/db/precompiled.ts';
import type { PartnerStatus } from '../partners/tables.ts';
import type { ApiKeysTable } from './tables.ts';

export type ApiKeyRow = Selectable<ApiKeysTable>;

/** What a token exchange needs, in one read: the key and its partner's state. */
export interface KeyWithPartner extends ApiKeyRow {
  partner_status: PartnerStatus;
  partner_ready_at: Date;
  partner_scopes: string[];
}

/** The key and its partner's state, for every token exchange: compiled once (decision 192). */
const keyWithPartner = precompile(
  (db: Db, kid: string) =>
    db
      .selectFrom('api_keys')
      .innerJoin('partners', 'partners.id', 'api_keys.partner_id')
      .selectAll('api_keys')
      .select(['partners.status as partner_status', 'partners.ready_at as partner_ready_at', 'partners.scopes as partner_scopes'])
      .where('api_keys.kid', '=', kid),
  1,
);

export async function findKeyWithPartner(db: Db, kid: string): Promise<KeyWithPartner | undefined> {
  return (await keyWithPartner(db, kid))[0];
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
