import type { Selectable } from 'kysely';
import type { PlatformScope } from '../auth/tenant.ts';
import type { KeyMode } from '../infra/mode.ts';

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

/** The tables this module owns, as the composition root merges them into the database type. */
export interface ProjectTables {
  projects: ProjectsTable;
}

/** A row of `projects` as a query answers it. */
export type ProjectRow = Selectable<ProjectsTable>;
