import type { Generated } from 'kysely';
import type { KeyMode } from '../infra/mode.ts';

export interface WebhooksTable {
  partner_id: string;
  mode: KeyMode;
  url: string;
  events: string[];
  enabled: boolean;
  secret: string;
  previous_secret_valid_until: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface WebhookAttemptsTable {
  seq: Generated<string>;
  partner_id: string;
  mode: KeyMode;
  delivery_id: string;
  event: string;
  delivered: boolean;
  attempt: number;
  status: number | null;
  error: string | null;
  at: Date;
}

/**
 * One row per event a receiver wanted when it was recorded: the delivery, with its own copy of the
 * event (what it sends), its state, attempts, next due time and lease. Keyed by the event's id, which
 * is also the delivery id.
 */
export interface WebhookDeliveriesTable {
  id: string;
  partner_id: string;
  mode: KeyMode;
  type: string;
  data: unknown;
  created_at: Date;
  state: Generated<DeliveryState>;
  attempts: Generated<number>;
  /** When the next attempt is due; null: at once. */
  due_at: Date | null;
  /** A process is sending it until then (a killed process's lease runs out). */
  lease_until: Date | null;
  /** Unix seconds of the signature, fixed at the first attempt and kept by every retry. */
  signed_at: string | number | null;
  signature: string | null;
  /** The W3C `traceparent` of what recorded the event, when traces are on: each attempt's span links to it. */
  trace_parent: Generated<string | null>;
}

/** `pending` until an outcome: delivered, failed (retries exhausted or refused), or skipped (no longer wanted). */
export type DeliveryState = 'pending' | 'delivered' | 'failed' | 'skipped';

/** The tables this module owns, as the composition root merges them into the database type. */
export interface WebhookTables {
  webhooks: WebhooksTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_deliveries: WebhookDeliveriesTable;
}
