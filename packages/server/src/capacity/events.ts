import { Type } from 'typebox';
import { Quota } from './schemas.ts';

/** partner-api.md, Event kinds: the `data` of the events a quota or plan change records. */
export const CAPACITY_EVENTS = {
  'customer.quota_changed': Type.Object({ customer_id: Type.String(), quota: Quota }),
  'customer.plan_changed': Type.Object({ customer_id: Type.String(), plan_id: Type.String() }),
};

type CapacityEventSchemas = typeof CAPACITY_EVENTS;

declare module '../events/payloads.ts' {
  interface EventSchemas extends CapacityEventSchemas {}
}
