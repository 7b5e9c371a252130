import { type QueryCreator, sql } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import { afterCommit } from '../infra/db/transactions.ts';
import { newId } from '../infra/ids.ts';
import type { KeyMode } from '../infra/mode.ts';
import { eventFamily, initialDeliveryState } from '../webhooks/store.ts';
import { EVENT_TYPES, type EventType, type NewEvent, newEvent } from './payloads.ts';

export { EVENT_TYPES, type EventType, type NewEvent, newEvent };

import type { DeliveryState, EventTables } from './tables.ts';

const recordedListeners = new Set<() => void>();

/**
 * Calls `listener` after each commit that recorded events (the webhook dispatcher wakes on it, instead
 * of polling for them). Returns the function that stops the calls.
 */
export function onEventsRecorded(listener: () => void): () => void {
  recordedListeners.add(listener);
  return () => recordedListeners.delete(listener);
}

function announceRecorded(): void {
  for (const listener of recordedListeners) listener();
}

/**
 * Wakes the listeners once the caller's transaction commits, when the event it recorded waits for a
 * delivery. An event no receiver wants is recorded `skipped`, and nothing need wake for it (a partner
 * without a webhook does not wake the dispatcher once a change).
 */
export function announceRecordedEvent(deliveryState: DeliveryState | null | undefined): void {
  if (deliveryState === 'pending') afterCommit(announceRecorded);
}

/**
 * Records an event in the caller's transaction, the one that made the change
 * it reports (the outbox): the change and its event commit together or not at
 * all, so no event is lost or recorded twice. The webhook dispatcher delivers it later, if the
 * partner's receiver wants it.
 */
export async function recordEvent<T extends EventType>(trx: Db<EventTables>, event: NewEvent<T>): Promise<string> {
  const { id, delivery_state } = await eventInsert(trx, event).returning('id').executeTakeFirstOrThrow();
  // After the insert: outside a transaction, the row is already there when the listeners hear of it.
  announceRecordedEvent(delivery_state);
  return id;
}

/**
 * `recordEvent` as a builder, for a transaction's statement that writes a change and its event together
 * (an operation's outcome and the event announcing it). It returns the event's
 * `delivery_state`: the caller hands it to `announceRecordedEvent` once the statement has run, so the
 * listeners hear of it as they do of `recordEvent`'s.
 */
export function eventInsert<T extends EventType>(qc: QueryCreator<EventTables>, event: NewEvent<T>) {
  return boundEventInsert(qc, eventValues(event));
}

/** A new event's row as the values its insert binds: the arguments of a statement compiled once. */
export interface EventValues {
  eventId: string;
  eventPartnerId: string;
  eventMode: KeyMode;
  eventType: EventType;
  /** `eventFamily(eventType)`, bound apart. */
  eventFamily: string;
  /** The payload as JSON text. */
  eventData: string;
  eventAt: Date;
}

export function eventValues<T extends EventType>(event: NewEvent<T>): EventValues {
  return {
    eventId: newId('delivery'),
    eventPartnerId: event.partnerId,
    eventMode: event.mode,
    eventType: event.type,
    eventFamily: eventFamily(event.type),
    eventData: JSON.stringify(event.data),
    eventAt: event.at,
  };
}

/** `eventInsert` of values given one by one (each only bound): what a precompiled statement builds. */
export function boundEventInsert(qc: QueryCreator<EventTables>, v: EventValues) {
  const row = qc.selectNoFrom([
    sql<string>`${v.eventId}`.as('id'),
    sql<string>`${v.eventPartnerId}`.as('partner_id'),
    sql<KeyMode>`${v.eventMode}`.as('mode'),
    sql<string>`${v.eventType}`.as('type'),
    sql`${v.eventData}::jsonb`.as('data'),
    sql<Date>`${v.eventAt}::timestamptz`.as('created_at'),
    initialDeliveryState(v.eventPartnerId, v.eventMode, v.eventType, v.eventFamily).as('delivery_state'),
  ]);
  return qc
    .insertInto('events')
    .columns(['id', 'partner_id', 'mode', 'type', 'data', 'created_at', 'delivery_state'])
    .expression(row)
    .returning('delivery_state');
}

const STREAM_COLUMNS = ['id', 'type', 'created_at', 'partner_id', 'data'] as const;

/** The partner's events of one mode with ids above `afterId`, oldest first (the event stream's read). */
export function eventsAfter(db: Db<EventTables>, query: { partnerId: string; mode: KeyMode; afterId: string; limit: number }) {
  return db
    .selectFrom('events')
    .select(STREAM_COLUMNS)
    .where('partner_id', '=', query.partnerId)
    .where('mode', '=', query.mode)
    .where('id', '>', query.afterId)
    .orderBy('id', 'asc')
    .limit(query.limit)
    .execute();
}

/** The id of the partner's newest event of one mode: where a stream without `Last-Event-ID` starts. */
export async function newestEventId(db: Db<EventTables>, partnerId: string, mode: KeyMode): Promise<string | undefined> {
  const row = await db
    .selectFrom('events')
    .select('id')
    .where('partner_id', '=', partnerId)
    .where('mode', '=', mode)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}
