import type { Generated } from 'kysely';

/**
 * The typed shape of every table. Each module owns its tables (and their
 * migration, beside its store); this interface is their union so that Kysely
 * type-checks every query.
 */
export interface Database {
  server_secrets: ServerSecretsTable;
  partners: PartnersTable;
  api_keys: ApiKeysTable;
  audit_log: AuditLogTable;
  idempotency_keys: IdempotencyKeysTable;
  rate_limits: RateLimitsTable;
}

export interface ServerSecretsTable {
  name: string;
  value: string;
  created_at: Generated<Date>;
}

export type PartnerStatus = 'active' | 'suspended';

export interface PartnersTable {
  id: string;
  display_name: string;
  status: PartnerStatus;
  scopes: string[];
  max_customers: number;
  max_projects_per_customer: number;
  max_open_operations: number;
  usage_window_days: number;
  rate_limit_per_minute: number;
  rate_limit_burst: number;
  allow_private_webhooks: boolean;
  default_plan_id: string;
  grace_days: number;
  customer_count: Generated<number>;
  ready_at: Date;
  suspended_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export type KeyMode = 'live' | 'test';

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

export interface AuditLogTable {
  id: string;
  at: Date;
  actor: string;
  action: string;
  partner_id: string | null;
  target: string;
  before: unknown;
  after: unknown;
  request_id: string;
}

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

export interface RateLimitsTable {
  key: string;
  /** GCRA theoretical arrival time, epoch milliseconds. */
  tat_ms: number;
  /** Tokens the last reservation took (SqlRateLimiter). */
  granted: number;
}
