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

/** The tables this module owns, as the composition root merges them into the database type. */
export interface WebhookTables {
  webhooks: WebhooksTable;
  webhook_attempts: WebhookAttemptsTable;
}
