import { type Static, Type } from 'typebox';
import type { EventsTable } from './tables.ts';

/** partner-api.md, Event body: what a webhook delivery carries and `GET /events` lists. */
export const EventBody = Type.Object(
  {
    id: Type.String({ description: 'The delivery id (`dlv_...`); deduplicate on it.' }),
    event: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    partner_id: Type.String(),
    data: Type.Record(Type.String(), Type.Unknown()),
  },
  { title: 'Event' },
);
export type EventBody = Static<typeof EventBody>;

/** An event id as minted (`dlv_` and 26 base-32 characters). */
export const EVENT_ID = /^dlv_[0-9a-z]{26}$/;

/** `GET /events/stream`: where to continue. */
export const EventStreamHeaders = Type.Object({
  'Last-Event-ID': Type.Optional(
    Type.String({
      pattern: EVENT_ID.source,
      description: 'The `id` of the last event received: the stream continues after it (the few seconds before it are repeated).',
    }),
  ),
});

/** The stream as the document describes it: a sequence of server-sent events whose `data` is an Event. */
export const EventStreamResponse = {
  description: 'A stream of server-sent events (`id`, `event`, `data`: the Event body as a webhook carries it).',
  content: {
    'text/event-stream': {
      schema: Type.String({ description: 'Server-sent events; each `data` line is one Event, as JSON.' }),
    },
  },
};

type EventRow = Pick<EventsTable, 'id' | 'type' | 'created_at' | 'partner_id' | 'data'>;

/** The event body of a recorded event; keys in the order of the spec's table. */
export function toEventBody(row: EventRow): EventBody {
  return {
    id: row.id,
    event: row.type,
    created_at: row.created_at.toISOString(),
    partner_id: row.partner_id,
    data: row.data as Record<string, unknown>,
  };
}

/**
 * The exact bytes a delivery sends and signs. Every attempt of a delivery rebuilds them from the
 * same row, and `jsonb` returns its keys in one canonical order, so retries send identical bytes.
 */
export function serializeEventBody(row: EventRow): string {
  return JSON.stringify(toEventBody(row));
}
