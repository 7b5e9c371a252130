import { sql } from 'kysely';
import type { Db } from '../app/database.ts';
import type { DeliveryState } from '../events/tables.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { WebhookAttemptsTable, WebhooksTable } from './tables.ts';

/** partner-api.md, Limits: the delivery log keeps the 50 most recent attempts. */
export const DELIVERY_LOG_SIZE = 50;

export type WebhookRow = WebhooksTable;

export function findWebhook(db: Db, partnerId: string, mode: KeyMode): Promise<WebhookRow | undefined> {
  return db.selectFrom('webhooks').selectAll().where('partner_id', '=', partnerId).where('mode', '=', mode).executeTakeFirst();
}

/** A receiver with what delivering to it needs to know of its partner. */
export type DeliveryTarget = WebhookRow & { allow_private_webhooks: boolean };

export async function findDeliveryTargets(db: Db, partnerIds: readonly string[]): Promise<Map<string, DeliveryTarget>> {
  if (partnerIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('webhooks')
    .innerJoin('partners', 'partners.id', 'webhooks.partner_id')
    .selectAll('webhooks')
    .select('partners.allow_private_webhooks')
    .where('webhooks.partner_id', 'in', [...new Set(partnerIds)])
    .execute();
  return new Map(rows.map((row) => [targetKey(row.partner_id, row.mode), row]));
}

/**
 * The delivery state a new event starts in, decided in the transaction that records it: `pending`
 * when its partner's receiver (of its mode) is enabled and its filter takes the event, `skipped`
 * otherwise. The filter rule is `filterMatches` (event-filter.ts) in SQL. A configuration changed
 * before the delivery is sent is checked again then. `family` is the event's (`eventFamily`), given
 * apart for a statement compiled once, where every value is bound.
 */
export function initialDeliveryState(partnerId: string, mode: KeyMode, event: string, family = eventFamily(event)) {
  return sql<DeliveryState>`(case when exists (
      select 1 from webhooks w
      where w.partner_id = ${partnerId} and w.mode = ${mode} and w.enabled
        and (cardinality(w.events) = 0 or w.events && array['*', ${event}, ${family}]::text[])
    ) then 'pending' else 'skipped' end)`;
}

/** The filter entry naming every event of `event`'s kind: `customer.*` for `customer.ready`. */
export const eventFamily = (event: string) => `${event.split('.')[0]}.*`;

export const targetKey = (partnerId: string, mode: KeyMode) => `${partnerId}/${mode}`;

export type NewAttempt = Omit<WebhookAttemptsTable, 'seq'>;

/** Appends attempts to the delivery log and trims each touched log to its 50 most recent. */
export async function appendAttempts(trx: Db, attempts: readonly NewAttempt[]): Promise<void> {
  if (attempts.length === 0) return;
  await trx
    .insertInto('webhook_attempts')
    .values([...attempts])
    .execute();
  const logs = new Map(attempts.map((a) => [targetKey(a.partner_id, a.mode), a]));
  for (const { partner_id, mode } of logs.values()) {
    await sql`
      delete from webhook_attempts
      where partner_id = ${partner_id} and mode = ${mode} and seq < (
        select min(seq) from (
          select seq from webhook_attempts where partner_id = ${partner_id} and mode = ${mode}
          order by seq desc limit ${DELIVERY_LOG_SIZE}) as recent)`.execute(trx);
  }
}
