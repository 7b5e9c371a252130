import { type Kysely, sql } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import { newId } from '../infra/ids.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { EventType, NewEvent, RecordedEvent } from './payloads.ts';
import type { EventTables } from './tables.ts';

/** Every event is written by this statement, compiled once. */
const insert = precompile(
  (db: Kysely<EventTables>, a: { id: string; partnerId: string; mode: KeyMode; type: string; data: string; at: Date }) =>
    db.insertInto('events').values({
      id: a.id,
      partner_id: a.partnerId,
      mode: a.mode,
      type: a.type,
      data: sql`${a.data}::jsonb`,
      created_at: a.at,
    }),
);

/** Writes an event with a new id, in the caller's transaction. */
export async function insertEvent<T extends EventType>(trx: Db<EventTables>, event: NewEvent<T>): Promise<RecordedEvent<T>> {
  const recorded = { ...event, id: newId('delivery') };
  await insert(trx, {
    id: recorded.id,
    partnerId: event.partnerId,
    mode: event.mode,
    type: event.type,
    data: JSON.stringify(event.data),
    at: event.at,
  });
  return recorded;
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
