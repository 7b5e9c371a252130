import { Type } from 'typebox';
import { CreateOutcome } from '../projects/events.ts';
import { CustomerStatus } from './schemas.ts';

const Timestamp = Type.String({ format: 'date-time' });

const CustomerCreated = Type.Object({
  ...CreateOutcome,
  state: Type.Union([CustomerStatus, Type.Literal('deleted')], { description: "The customer's status when its creation finished." }),
});

/** partner-api.md, Event kinds: the `data` of the events a customer's lifecycle records. */
export const CUSTOMER_EVENTS = {
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
};

type CustomerEventSchemas = typeof CUSTOMER_EVENTS;

declare module '../events/payloads.ts' {
  interface EventSchemas extends CustomerEventSchemas {}
}
