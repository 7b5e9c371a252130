import { type Static, type TSchema, Type } from 'typebox';
import { Quota } from '../capacity/schemas.ts';
import { CustomerStatus } from '../customers/schemas.ts';
import type { KeyMode } from '../infra/mode.ts';
import { OperationError } from '../operations/schemas.ts';
import { Project } from '../projects/schemas.ts';
import { EventBody } from './schemas.ts';

/**
 * partner-api.md, Event kinds: the `data` of every event, defined once. `EventService.record` is typed by
 * these (the server cannot record a payload the document does not describe), the OpenAPI document's
 * `webhooks` section is built from them, and the SDK's `WebhookEvent` union is generated from that.
 */

const Timestamp = Type.String({ format: 'date-time' });

/** The outcome of a create operation: its project (null once gone), the state it left, and the error of a failure. */
const CreateOutcome = {
  customer_id: Type.String(),
  operation_id: Type.String(),
  project: Type.Union([Project, Type.Null()]),
  error: Type.Union([OperationError, Type.Null()], { description: 'Set when the operation failed.' }),
};

const CustomerCreated = Type.Object({
  ...CreateOutcome,
  state: Type.Union([CustomerStatus, Type.Literal('deleted')], { description: "The customer's status when its creation finished." }),
});
const ProjectCreated = Type.Object({ ...CreateOutcome, state: Project.properties.state });

export const EVENT_DATA = {
  ping: Type.Object({ message: Type.String() }),
  'customer.ready': CustomerCreated,
  'customer.failed': CustomerCreated,
  'customer.suspended': Type.Object({
    customer_id: Type.String(),
    state: Type.Literal('suspended'),
    suspended_at: Timestamp,
    workloads_running: Type.Integer(),
  }),
  'customer.resumed': Type.Object({
    customer_id: Type.String(),
    state: Type.Literal('active'),
    workloads_running: Type.Integer(),
    cancelled_scheduled_deletion: Type.Boolean(),
  }),
  'customer.deletion_scheduled': Type.Object({
    customer_id: Type.String(),
    state: Type.Literal('deletion_scheduled'),
    scheduled_deletion_at: Timestamp,
    grace_days: Type.Integer(),
    recoverable: Type.Boolean(),
  }),
  'customer.deleted': Type.Object({
    customer_id: Type.String(),
    immediate: Type.Boolean({ description: 'True after an immediate delete; false when a grace period ran out.' }),
  }),
  'customer.quota_changed': Type.Object({ customer_id: Type.String(), quota: Quota }),
  'customer.plan_changed': Type.Object({ customer_id: Type.String(), plan_id: Type.String() }),
  'project.ready': ProjectCreated,
  'project.failed': ProjectCreated,
  'project.deleted': Type.Object({ customer_id: Type.String(), project: Type.String({ description: 'The project name.' }) }),
} satisfies Record<string, TSchema>;

export type EventName = keyof typeof EVENT_DATA;
export type EventData<T extends EventName> = Static<(typeof EVENT_DATA)[T]>;

/** `customer.quota_changed` → `CustomerQuotaChangedEvent`: the name of an event body in the document. */
export function eventSchemaName(event: EventName): string {
  const words = event.split(/[._]/).map((word) => word.charAt(0).toUpperCase() + word.slice(1));
  return `${words.join('')}Event`;
}

/** The body a delivery of `event` carries (partner-api.md, Event body), with its `data` schema. */
export function eventBodySchema<T extends EventName>(event: T) {
  return Type.Object({ ...EventBody.properties, event: Type.Literal(event), data: EVENT_DATA[event] }, { title: eventSchemaName(event) });
}

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

/** An event as recorded, with the id it was given (which is also its webhook delivery's). */
export type RecordedEvent<T extends EventType = EventType> = NewEvent<T> & { id: string };

/** An event typed by its kind's payload (`payloads.ts`), for an operation's outcome to announce (`Finished`). */
export function newEvent<T extends EventType>(event: NewEvent<T>): NewEvent {
  return event;
}
