import { type Static, type TObject, Type } from 'typebox';
import type { KeyMode } from '../infra/mode.ts';
import { EventBody } from './schemas.ts';

/** `ping`'s data: the test delivery `POST /webhook/test` sends, which no state change records. */
export const PING_DATA = Type.Object({ message: Type.String() });

/**
 * partner-api.md, Event kinds: the schema of every event's `data`, by kind. The module that records a
 * kind declares its schema beside its own (`customers/events.ts`, `projects/events.ts`,
 * `capacity/events.ts`) and adds it here by declaration merging, as Fastify's decorators are typed, so
 * that this module knows none of theirs. `EventService.record` is typed by them (the server cannot record a
 * payload the document does not describe), the OpenAPI document's `webhooks` section is built from them
 * (`openapi/events.ts`), and the SDK's `WebhookEvent` union is generated from that.
 */
export interface EventSchemas {
  ping: typeof PING_DATA;
}

export type EventName = keyof EventSchemas;
export type EventData<T extends EventName> = Static<EventSchemas[T]>;

/** The events a state change records: every kind but `ping` (sent only by `POST /webhook/test`). */
export type EventType = Exclude<EventName, 'ping'>;

/**
 * Every kind a state change records, in the document's order: the `type` filter and the webhook
 * filters name them. A kind declared without being listed here, or listed without a schema, does not compile.
 */
const RECORDED: Record<EventType, true> = {
  'customer.ready': true,
  'customer.failed': true,
  'customer.suspended': true,
  'customer.resumed': true,
  'customer.deletion_scheduled': true,
  'customer.deleted': true,
  'customer.quota_changed': true,
  'customer.plan_changed': true,
  'project.ready': true,
  'project.failed': true,
  'project.deleted': true,
};
export const EVENT_TYPES = Object.keys(RECORDED) as EventType[];

/** `customer.quota_changed` → `CustomerQuotaChangedEvent`: the name of an event body in the document. */
export function eventSchemaName(event: EventName): string {
  const words = event.split(/[._]/).map((word) => word.charAt(0).toUpperCase() + word.slice(1));
  return `${words.join('')}Event`;
}

/** The body a delivery of `event` carries (partner-api.md, Event body), with its `data` schema. */
export function eventBodySchema<T extends EventName>(event: T, data: TObject) {
  return Type.Object({ ...EventBody.properties, event: Type.Literal(event), data }, { title: eventSchemaName(event) });
}

export interface NewEvent<T extends EventType = EventType> {
  partnerId: string;
  mode: KeyMode;
  type: T;
  /** Typed by the event's schema (`EventSchemas`), which the OpenAPI document publishes. */
  data: EventData<T>;
  /** The partner's mode clock at the change. */
  at: Date;
}

/** An event as recorded, with the id it was given (which is also its webhook delivery's). */
export type RecordedEvent<T extends EventType = EventType> = NewEvent<T> & { id: string };

/** An event typed by its kind's payload (`EventSchemas`), for an operation's outcome to announce (`Finished`). */
export function newEvent<T extends EventType>(event: NewEvent<T>): NewEvent {
  return event;
}
