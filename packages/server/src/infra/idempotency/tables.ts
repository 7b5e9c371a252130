import type { KeyMode } from '../../infra/mode.ts';

export interface IdempotencyKeysTable {
  partner_id: string;
  mode: KeyMode;
  key: string;
  fingerprint: string;
  state: 'running' | 'done';
  status_code: number | null;
  body: string | null;
  /** The first request's id: a replay answers with it, so X-Request-Id matches the body. */
  request_id: string;
  locked_until: Date;
  expires_at: Date;
  created_at: Date;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface IdempotencyTables {
  idempotency_keys: IdempotencyKeysTable;
}
