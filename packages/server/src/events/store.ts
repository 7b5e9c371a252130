import type { Db } from '../infra/db/database.ts';
import type { KeyMode } from '../infra/db/schema.ts';
import { newId } from '../infra/ids.ts';
import { initialDeliveryState } from '../webhooks/store.ts';
import { EVENT_DATA, type EventData, type EventName } from './payloads.ts';

/** The events a state change records: every kind in `payloads.ts` but `ping` (sent only by `POST /webhook/test`). */
export type EventType = Exclude<EventName, 'ping'>;
export const EVENT_TYPES = (Object.keys(EVENT_DATA) as EventName[]).filter((name): name is EventType => name !== 'ping');

export interface NewEvent<T extends EventType = EventType> {
  partnerId: string;
  mode: KeyMode;
  type: T;
  /** Typed by the event's schema (`payloads.ts`), which the OpenAPI document publishes. */
  data: EventData<T>;
  /** The partner's mode clock at the change. */
  at: Date;
}

/**
 * Records an event in the caller's transaction, the one that made the change
 * it reports (the outbox): the change and its event commit together or not at
 * all, so no event is lost or recorded twice. The webhook dispatcher delivers it later, if the
 * partner's receiver wants it.
 */
export async function recordEvent<T extends EventType>(trx: Db, event: NewEvent<T>): Promise<string> {
  const id = newId('delivery');
  await trx
    .insertInto('events')
    .values({
      id,
      partner_id: event.partnerId,
      mode: event.mode,
      type: event.type,
      data: JSON.stringify(event.data),
      created_at: event.at,
      delivery_state: initialDeliveryState(event.partnerId, event.mode, event.type),
    })
    .execute();
  return id;
}
