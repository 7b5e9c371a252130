import type { ColumnType, Generated } from 'kysely';
import type { KeyMode } from '../infra/mode.ts';
import type { PartialResources, Resources } from './resources.ts';

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

/**
 * A customer's plan and quota (keyed by the customer's uid): what it holds of its partner's pool, the
 * revision the platform has applied, and a refused revision's retry.
 */
export interface CustomerQuotasTable {
  customer_uid: string;
  plan_id: string;
  /** jsonb; objects are written as JSON by both drivers. */
  quota: Resources;
  quota_revision: number;
  project_caps: Record<string, PartialResources>;
  /** The quota revision the platform has applied (a sweep applies a newer one). */
  quota_applied_revision: number | null;
  /** A refused quota's retry: the revision that failed, when to try it again, how often it failed and why. */
  quota_retry_revision: number | null;
  quota_retry_at: Date | null;
  quota_retry_count: number;
  quota_retry_problem: string | null;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface CapacityTables {
  gpu_profiles: GpuProfilesTable;
  plans: PlansTable;
  partner_capacity: PartnerCapacityTable;
  capacity_allocations: CapacityAllocationsTable;
  customer_quotas: CustomerQuotasTable;
}
