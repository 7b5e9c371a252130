import type { ColumnType, Generated } from 'kysely';
import type { KeyMode } from '../infra/mode.ts';
import type { Resources } from './resources.ts';

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

/** The tables this module owns, as the composition root merges them into the database type. */
export interface CapacityTables {
  gpu_profiles: GpuProfilesTable;
  plans: PlansTable;
  partner_capacity: PartnerCapacityTable;
  capacity_allocations: CapacityAllocationsTable;
}
