import type { Generated } from 'kysely';
import type { KeyMode } from '../infra/mode.ts';

export interface EventsTable {
  /** The delivery id (`dlv_...`), which is also the event body's `id`. */
  id: string;
  partner_id: string;
  mode: KeyMode;
  type: string;
  data: unknown;
  created_at: Date;
  /** Delivery to the partner's webhook (the webhooks module's columns). */
  delivery_state: Generated<DeliveryState>;
  delivery_attempts: Generated<number>;
  /** When the next attempt is due; null: at once. */
  delivery_due_at: Date | null;
  /** A process is sending it until then (a killed process's lease runs out). */
  delivery_lease_until: Date | null;
  /** Unix seconds of the signature, fixed at the first attempt and kept by every retry. */
  signed_at: string | number | null;
  signature: string | null;
}

/** `pending` until an outcome: delivered, failed (retries exhausted or refused), or skipped (no receiver wanted it). */
export type DeliveryState = 'pending' | 'delivered' | 'failed' | 'skipped';

/** The tables this module owns, as the composition root merges them into the database type. */
export interface EventTables {
  events: EventsTable;
}
