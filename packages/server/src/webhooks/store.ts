import { type Kysely, sql } from 'kysely';
import type { RecordedEvent } from '../events/payloads.ts';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import type { KeyMode } from '../infra/mode.ts';
import { tracing } from '../infra/telemetry/tracing.ts';
import type { DeliveryState, WebhookAttemptsTable, WebhooksTable, WebhookTables } from './tables.ts';

/** partner-api.md, Limits: the delivery log keeps the 50 most recent attempts. */
export const DELIVERY_LOG_SIZE = 50;

export type WebhookRow = WebhooksTable;

export function findWebhook(db: Db<WebhookTables>, partnerId: string, mode: KeyMode): Promise<WebhookRow | undefined> {
  return db.selectFrom('webhooks').selectAll().where('partner_id', '=', partnerId).where('mode', '=', mode).executeTakeFirst();
}

/** A receiver with what delivering to it needs to know of its partner (the dispatcher's claim reads it). */
export type DeliveryTarget = Pick<WebhookRow, 'partner_id' | 'mode' | 'url' | 'events' | 'enabled' | 'secret'> & {
  allow_private_webhooks: boolean;
};

/** A new delivery's row as bound values: the arguments of a statement compiled once. */
interface QueuedValues {
  id: string;
  partnerId: string;
  mode: KeyMode;
  type: string;
  /** `eventFamily(type)`, bound apart. */
  family: string;
  /** The payload as JSON text. */
  data: string;
  at: Date;
  traceParent: string | null;
}

/**
 * Inserts the delivery only when the event's partner has an enabled receiver (of its mode) whose filter
 * takes the event: the filter rule is `filterMatches` (event-filter.ts) in SQL. A configuration changed
 * before the delivery is sent is checked again then.
 */
const insertWanted = precompile((db: Kysely<WebhookTables>, a: QueuedValues) =>
  db
    .insertInto('webhook_deliveries')
    .columns(['id', 'partner_id', 'mode', 'type', 'data', 'created_at', 'trace_parent'])
    .expression(
      db
        .selectFrom('webhooks as w')
        .select([
          sql<string>`${a.id}::text`.as('id'),
          'w.partner_id',
          'w.mode',
          sql<string>`${a.type}::text`.as('type'),
          sql<unknown>`${a.data}::jsonb`.as('data'),
          sql<Date>`${a.at}::timestamptz`.as('created_at'),
          sql<string | null>`${a.traceParent}::text`.as('trace_parent'),
        ])
        .where('w.partner_id', '=', a.partnerId)
        .where('w.mode', '=', a.mode)
        .where('w.enabled', '=', true)
        .where(sql<boolean>`(cardinality(w.events) = 0 or w.events && array['*', ${a.type}, ${a.family}]::text[])`),
    ),
);

/**
 * Queues the delivery of a newly recorded event, in the transaction that records it, when its
 * partner's receiver wants it. Answers whether it did: an event no receiver wants leaves no row, so
 * nothing waits for it.
 */
export async function queueDelivery(db: Db<WebhookTables>, event: RecordedEvent): Promise<boolean> {
  const result = await insertWanted(db, {
    id: event.id,
    partnerId: event.partnerId,
    mode: event.mode,
    type: event.type,
    family: eventFamily(event.type),
    data: JSON.stringify(event.data),
    at: event.at,
    // The span recording the event (a request's, or an operation look's), which the attempts link to.
    traceParent: tracing().traceparent(),
  });
  return (result.numAffectedRows ?? 0n) > 0n;
}

/** The filter entry naming every event of `event`'s kind: `customer.*` for `customer.ready`. */
export const eventFamily = (event: string) => `${event.split('.')[0]}.*`;

const targetKey = (partnerId: string, mode: KeyMode) => `${partnerId}/${mode}`;

export type NewAttempt = Omit<WebhookAttemptsTable, 'seq'>;

/** A delivery's next state after an attempt: pending again with its retry's time, delivered or failed. */
export interface DeliverySettlement {
  id: string;
  state: DeliveryState;
  attempts: number;
  dueAt: Date | null;
}

/**
 * Appends attempts to the delivery log, keeping each touched log to its 50 most recent, and writes
 * the deliveries' next states (`settled`, the attempts' deliveries; their leases released), all in one
 * statement: the dispatcher's outcomes are one round trip instead of a five-statement
 * transaction. The values travel as arrays, so the text is the same for any number of outcomes:
 * prepared once per connection, where a list of rows made one statement per length.
 *
 * A statement's parts see one snapshot, so the trim cannot see the rows the same statement adds: of a
 * log's new attempts only its 50 most recent are inserted, and of its old ones only as many as still fit.
 * The trim walks each touched log by its index, newest first, past those it keeps, and deletes the rest
 * by their place in the table (`ctid`): its cost is the log's, never the table's.
 */
export async function appendAttempts(
  db: Db<WebhookTables>,
  attempts: readonly NewAttempt[],
  settled: readonly DeliverySettlement[] = [],
): Promise<void> {
  if (attempts.length === 0) return;
  const logs = new Map<string, NewAttempt[]>();
  for (const attempt of attempts) {
    const key = targetKey(attempt.partner_id, attempt.mode);
    const log = logs.get(key);
    if (log) log.push(attempt);
    else logs.set(key, [attempt]);
  }
  const added = [...logs.values()].flatMap((log) => log.slice(-DELIVERY_LOG_SIZE));
  const trims = [...logs.values()].map((log) => ({
    partner: log[0]?.partner_id,
    mode: log[0]?.mode,
    keep: Math.max(0, DELIVERY_LOG_SIZE - log.length),
  }));
  await sql`
    with settled as (
      update webhook_deliveries d set state = v.state, attempts = v.attempts, due_at = v.due_at, lease_until = null
      from unnest(${settled.map((s) => s.id)}::text[], ${settled.map((s) => s.state)}::text[],
        ${settled.map((s) => s.attempts)}::integer[], ${settled.map((s) => s.dueAt?.toISOString() ?? null)}::timestamptz[])
        as v (id, state, attempts, due_at)
      where d.id = v.id
      returning 1),
    added as (
      insert into webhook_attempts (partner_id, mode, delivery_id, event, delivered, attempt, status, error, at)
      select partner_id, mode, delivery_id, event, delivered, attempt, status, error, at
      from unnest(${added.map((a) => a.partner_id)}::text[], ${added.map((a) => a.mode)}::text[],
        ${added.map((a) => a.delivery_id)}::text[], ${added.map((a) => a.event)}::text[],
        ${added.map((a) => a.delivered)}::boolean[], ${added.map((a) => a.attempt)}::integer[],
        ${added.map((a) => a.status)}::integer[], ${added.map((a) => a.error)}::text[],
        ${added.map((a) => a.at.toISOString())}::timestamptz[])
        with ordinality as a (partner_id, mode, delivery_id, event, delivered, attempt, status, error, at, n)
      order by n
      returning 1)
    delete from webhook_attempts old
    where old.ctid = any(array(
      select r.ctid
      from unnest(${trims.map((t) => t.partner)}::text[], ${trims.map((t) => t.mode)}::text[], ${trims.map((t) => t.keep)}::integer[])
        as log (partner_id, mode, keep)
      cross join lateral (
        select r.ctid from webhook_attempts r where r.partner_id = log.partner_id and r.mode = log.mode
        order by r.seq desc offset log.keep) as r))`.execute(db);
}

/** Enabled receivers whose newest attempt failed: one probe of the delivery log's index per receiver. */
export async function countFailingReceivers(db: Db<WebhookTables>): Promise<number> {
  const result = await sql<{ failing: number }>`
    select count(*)::int as failing from webhooks w
    where w.enabled and (
      select a.delivered from webhook_attempts a
      where a.partner_id = w.partner_id and a.mode = w.mode
      order by a.seq desc limit 1) is false`.execute(db);
  return result.rows[0]?.failing ?? 0;
}
