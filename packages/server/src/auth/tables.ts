import type { KeyMode } from '../infra/mode.ts';

export interface ApiKeysTable {
  kid: string;
  partner_id: string;
  mode: KeyMode;
  secret_hash: string;
  allow_cidrs: string[];
  expires_at: Date | null;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface AuthTables {
  api_keys: ApiKeysTable;
}
