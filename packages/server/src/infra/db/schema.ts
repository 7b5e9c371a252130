import type { ColumnType, Generated } from 'kysely';
import type { PartialResources, Resources } from '../../capacity/resources.ts';

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
  customers: CustomersTable;
  projects: ProjectsTable;
  users: UsersTable;
  operations: OperationsTable;
  events: EventsTable;
  webhooks: WebhooksTable;
  gpu_profiles: GpuProfilesTable;
  plans: PlansTable;
  partner_capacity: PartnerCapacityTable;
  capacity_allocations: CapacityAllocationsTable;
  webhook_attempts: WebhookAttemptsTable;
  sandbox_objects: SandboxObjectsTable;
  sandbox_address_ranges: SandboxAddressRangesTable;
  sandbox_workloads: SandboxWorkloadsTable;
  sandbox_failures: SandboxFailuresTable;
  sandbox_usage: SandboxUsageTable;
  console_logins: ConsoleLoginsTable;
  console_sessions: ConsoleSessionsTable;
  sandbox_vms: SandboxVmsTable;
  console_vms: ConsoleVmsTable;
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
  /** Live customers; test-mode customers are counted apart (CONTRACT §5: never mixed). */
  customer_count: Generated<number>;
  test_customer_count: Generated<number>;
  /** How far the partner's test clock runs ahead of the server's (CONTRACT §5, clock/advance). */
  test_clock_offset_ms: Generated<number>;
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

/**
 * Where a name must be unique: the live platform is one cluster shared by
 * every partner (customer ids, namespaces and emails name platform objects);
 * each partner's test mode is a sandbox of its own. `live` or `test:<partner>`.
 */
export type PlatformScope = string;

export type CustomerStatus = 'provisioning' | 'active' | 'failed' | 'suspended' | 'deletion_scheduled' | 'deleting';

export interface CustomersTable {
  /** Internal identity: a replacement customer reusing an id is a separate resource. */
  uid: string;
  platform_scope: PlatformScope;
  partner_id: string;
  mode: KeyMode;
  id: string;
  external_id: string | null;
  display_name: string | null;
  status: CustomerStatus;
  /** The status a scheduled deletion interrupted, restored by resume. */
  status_before_deletion: CustomerStatus | null;
  plan_id: string;
  owner_username: string;
  owner_email: string;
  created_at: Date;
  updated_at: Date;
  suspended_at: Date | null;
  suspension_reason: string | null;
  scheduled_deletion_at: Date | null;
  grace_days: number | null;
  deletion_immediate: boolean | null;
  /** What the customer holds of its partner's pool (jsonb; objects are written as JSON by both drivers). */
  quota: Resources;
  quota_revision: number;
  project_caps: Record<string, PartialResources>;
}

export type ProjectState = 'provisioning' | 'ready' | 'failed' | 'deleting';

export interface ProjectsTable {
  uid: string;
  customer_uid: string;
  platform_scope: PlatformScope;
  partner_id: string;
  mode: KeyMode;
  customer_id: string;
  name: string;
  state: ProjectState;
  namespace: string;
  cidr: string | null;
  created_at: Date;
  updated_at: Date;
}

export type UserRole = 'admin' | 'member';

export interface UsersTable {
  /** Immutable identity: a user created again with the same username is another person. */
  uid: string;
  customer_uid: string;
  platform_scope: PlatformScope;
  partner_id: string;
  mode: KeyMode;
  customer_id: string;
  username: string;
  email: string;
  /** Lower-cased email: uniqueness ignores case. */
  email_key: string;
  role: UserRole;
  is_owner: boolean;
  first_name: string | null;
  last_name: string | null;
  required_actions: string[];
  created_at: Date;
}

export type OperationType = 'customer.create' | 'customer.delete' | 'project.create' | 'project.delete';
export type OperationStatus = 'pending' | 'running' | 'succeeded' | 'failed';

export interface OperationsTable {
  id: string;
  partner_id: string;
  mode: KeyMode;
  type: OperationType;
  status: OperationStatus;
  customer_uid: string;
  customer_id: string;
  project: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  error_code: string | null;
  error_message: string | null;
  /** When the engine should look at it next (the partner's mode clock). */
  due_at: Date;
}

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

export type SandboxObjectKind = 'organization' | 'project' | 'user';

export interface SandboxObjectsTable {
  platform_scope: PlatformScope;
  kind: SandboxObjectKind;
  /** Organization: customer id; project: namespace; user: `<customer>/<username>`. */
  name: string;
  customer_id: string;
  ready_at: Date;
  failure_code: string | null;
  failure_message: string | null;
  /** Set when deletion starts: the object is gone from this time on. */
  gone_at: Date | null;
  attrs: unknown;
}

export interface SandboxAddressRangesTable {
  partner_id: string;
  mode: KeyMode;
  idx: number;
  cidr: string;
  namespace: string;
}

export interface SandboxWorkloadsTable {
  platform_scope: PlatformScope;
  customer_id: string;
  vms: string[];
  databases: string[];
  gpus: unknown;
  running: boolean;
}

export interface SandboxUsageTable {
  id: Generated<string>;
  platform_scope: PlatformScope;
  customer_id: string;
  started_at: Date;
  ended_at: Date | null;
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  gpus: ColumnType<Record<string, number>, string, string>;
}

export interface SandboxFailuresTable {
  id: Generated<number>;
  platform_scope: PlatformScope;
  type: string;
  code: string | null;
  message: string | null;
  customer_id: string | null;
  project: string | null;
  remaining: number;
  created_at: Date;
}

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

export interface GpuProfilesTable {
  name: string;
  display_name: string;
  memory_gib: number;
}

export interface PlansTable {
  id: string;
  display_name: string;
  quota: ColumnType<Resources, string, string>;
  created_at: Generated<Date>;
  updated_at: Date;
}

/** A partner's capacity settings; null columns (and a missing row) mean the defaults. */
export interface PartnerCapacityTable {
  partner_id: string;
  pool: ColumnType<Resources | null, string | null, string | null>;
  per_customer_max: ColumnType<Resources | null, string | null, string | null>;
  /** Plans the partner may assign; null: every plan of the catalogue. */
  plans: string[] | null;
  /** GPU profiles the partner may grant; null: every profile of the catalogue. */
  gpu_profiles: string[] | null;
  updated_at: Date;
}

export interface CapacityAllocationsTable {
  partner_id: string;
  mode: KeyMode;
  allocated: ColumnType<Resources, string, string>;
}

export interface SandboxVmsTable {
  platform_scope: PlatformScope;
  customer_id: string;
  /** `<namespace>/<name>`, as in `sandbox_workloads.vms`. */
  name: string;
  namespace: string;
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  image: unknown;
  created_at: Date;
}

/** The console's record of the VMs its users created: what the form asked for, by whom. */
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
