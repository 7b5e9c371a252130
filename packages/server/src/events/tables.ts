import type { KeyMode } from '../infra/mode.ts';

export interface EventsTable {
  /** The event's id (`dlv_...`): the event body's `id`, and the id of its webhook delivery. */
  id: string;
  partner_id: string;
  mode: KeyMode;
  type: string;
  data: unknown;
  created_at: Date;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface EventTables {
  events: EventsTable;
}
