import { CompiledQuery, type Selectable } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import { type ReservedRow, reservationSql } from '../infra/rate-limit/rate-limiter.ts';
import type { PartnerStatus, PartnerTables } from '../partners/tables.ts';
import type { ApiKeysTable, AuthTables } from './tables.ts';

/** A key is read with its partner in one statement: the join reaches into the partners module's table. */
type KeyWithPartnerDb = Db<AuthTables & PartnerTables>;

export type ApiKeyRow = Selectable<ApiKeysTable>;

/** What a token exchange needs, in one read: the key and its partner's state. */
export interface KeyWithPartner extends ApiKeyRow {
  partner_status: PartnerStatus;
  partner_ready_at: Date;
  partner_scopes: string[];
}

/** The key and its partner's state, for every token exchange: compiled once. */
const keyWithPartner = precompile((db: KeyWithPartnerDb, { kid }: { kid: string }) =>
  db
    .selectFrom('api_keys')
    .innerJoin('partners', 'partners.id', 'api_keys.partner_id')
    .selectAll('api_keys')
    .select(['partners.status as partner_status', 'partners.ready_at as partner_ready_at', 'partners.scopes as partner_scopes'])
    .where('api_keys.kid', '=', kid),
);

export async function findKeyWithPartner(db: KeyWithPartnerDb, kid: string): Promise<KeyWithPartner | undefined> {
  return (await keyWithPartner(db, { kid })).rows[0];
}

/** What a token exchange checks before its key's bucket is charged in the same statement. */
export interface ChargeCheck {
  secretHash: string;
  partnerId: string;
  mode: string;
  now: Date;
}

/**
 * The key and its partner's state, and, in the same round trip, the key's reservation from the shared
 * bucket: made only for a key the presented secret's hash matches and that could be
 * exchanged now (its partner and mode, not revoked, not expired, no address allowlist, which is
 * checked in the process). Values `$1`…`$7` are the reservation's (CarriedReservation).
 */
const KEY_CHARGING = `with k as (
  select api_keys.*, partners.status as partner_status, partners.ready_at as partner_ready_at, partners.scopes as partner_scopes
  from api_keys inner join partners on partners.id = api_keys.partner_id where api_keys.kid = $8),
eligible as (
  select 1 from k where k.secret_hash = $9 and k.partner_id = $10 and k.mode = $11 and k.revoked_at is null
  and (k.expires_at is null or k.expires_at > $12) and cardinality(k.allow_cidrs) = 0),
reserved as (${reservationSql('eligible')})
select k.*, reserved.tat_ms as reserved_tat_ms, reserved.granted as reserved_granted from k left join reserved on true`;

export async function findKeyCharging(
  db: Db<AuthTables>,
  kid: string,
  check: ChargeCheck,
  reservation: readonly unknown[],
): Promise<{ key: KeyWithPartner; reserved: ReservedRow | undefined } | undefined> {
  const values = [...reservation, kid, check.secretHash, check.partnerId, check.mode, check.now];
  const [row] = (
    await db.executeQuery<KeyWithPartner & { reserved_tat_ms: number | null; reserved_granted: number | null }>(
      CompiledQuery.raw(KEY_CHARGING, values),
    )
  ).rows;
  if (!row) return undefined;
  const { reserved_tat_ms: tat, reserved_granted: granted, ...key } = row;
  return { key, reserved: tat === null || granted === null ? undefined : { tat_ms: tat, granted } };
}

export async function insertKey(trx: Db<AuthTables>, row: ApiKeyRow): Promise<void> {
  await trx.insertInto('api_keys').values(row).execute();
}

export async function listKeys(db: Db<AuthTables>, partnerId: string): Promise<ApiKeyRow[]> {
  return db.selectFrom('api_keys').selectAll().where('partner_id', '=', partnerId).orderBy('created_at').orderBy('kid').execute();
}

export async function revokeKey(trx: Db<AuthTables>, partnerId: string, kid: string, at: Date): Promise<ApiKeyRow | undefined> {
  return trx
    .updateTable('api_keys')
    .set({ revoked_at: at })
    .where('partner_id', '=', partnerId)
    .where('kid', '=', kid)
    .where('revoked_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}
