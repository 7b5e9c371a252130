import type { ColumnType, Generated } from 'kysely';
import type { KeyMode } from '../../infra/mode.ts';

/** Where the sandbox keeps a name: `live` (one platform for every partner) or `test:<partner>` (each partner's own). */
export type SandboxScope = string;

export type SandboxObjectKind = 'organization' | 'project' | 'user';

export interface SandboxObjectsTable {
  platform_scope: SandboxScope;
  kind: SandboxObjectKind;
  /** Organization: its platform name; project: namespace; user: `<organization>/<username>`. */
  name: string;
  /** The organization the object belongs to (its own name, for an organization). */
  organization: string;
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
  platform_scope: SandboxScope;
  organization: string;
  vms: string[];
  databases: string[];
  gpus: unknown;
  running: boolean;
  /** Those of `vms` the customer stopped: they do not run, and a resume leaves them stopped. */
  halted: ColumnType<string[], string[] | undefined, string[]>;
}

export interface SandboxUsageTable {
  id: Generated<string>;
  platform_scope: SandboxScope;
  organization: string;
  started_at: Date;
  ended_at: Date | null;
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  gpus: ColumnType<Record<string, number>, string, string>;
}

export interface SandboxFailuresTable {
  id: Generated<number>;
  platform_scope: SandboxScope;
  type: string;
  code: string | null;
  message: string | null;
  customer_id: string | null;
  project: string | null;
  remaining: number;
  created_at: Date;
}

/** VMs made from the console's form: their size (usage and quota count it) and the image they boot. */
export interface SandboxVmsTable {
  platform_scope: SandboxScope;
  organization: string;
  /** `<namespace>/<name>`, as in `sandbox_workloads.vms`. */
  name: string;
  namespace: string;
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  image: unknown;
  created_at: Date;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface SandboxTables {
  sandbox_objects: SandboxObjectsTable;
  sandbox_address_ranges: SandboxAddressRangesTable;
  sandbox_workloads: SandboxWorkloadsTable;
  sandbox_failures: SandboxFailuresTable;
  sandbox_usage: SandboxUsageTable;
  sandbox_vms: SandboxVmsTable;
}
