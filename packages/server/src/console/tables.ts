import type { KeyMode } from '../infra/mode.ts';

export interface ConsoleLoginsTable {
  token_hash: string;
  partner_id: string;
  mode: KeyMode;
  customer_uid: string;
  user_uid: string;
  expires_at: Date;
  used_at: Date | null;
  created_at: Date;
}

export interface ConsoleSessionsTable {
  id_hash: string;
  partner_id: string;
  mode: KeyMode;
  customer_uid: string;
  user_uid: string;
  /** Forms post with it (a per-session token against cross-site requests). */
  csrf_token: string;
  expires_at: Date;
  created_at: Date;
}

/** The console's record of the VMs its users created: what the form asked for, by whom (the platform says what exists). */
export interface ConsoleVmsTable {
  customer_uid: string;
  namespace: string;
  name: string;
  os_name: string;
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  created_by: string;
  created_at: Date;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface ConsoleTables {
  console_logins: ConsoleLoginsTable;
  console_sessions: ConsoleSessionsTable;
  console_vms: ConsoleVmsTable;
}
