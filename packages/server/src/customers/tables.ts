import type { Selectable } from 'kysely';
import type { PlatformScope } from '../auth/tenant.ts';
import type { KeyMode } from '../infra/mode.ts';

export type CustomerStatus = 'provisioning' | 'active' | 'failed' | 'suspended' | 'deletion_scheduled' | 'deleting';

export interface CustomersTable {
  /** Internal identity: a replacement customer reusing an id is a separate resource. */
  uid: string;
  platform_scope: PlatformScope;
  partner_id: string;
  mode: KeyMode;
  /** The partner's id for it: unique per partner and mode. */
  id: string;
  /** Its name on the platform, `<partner prefix>-<id>`, fixed at creation (the organization's name). */
  organization: string;
  external_id: string | null;
  display_name: string | null;
  status: CustomerStatus;
  /** The status a scheduled deletion interrupted, restored by resume. */
  status_before_deletion: CustomerStatus | null;
  owner_username: string;
  owner_email: string;
  created_at: Date;
  updated_at: Date;
  suspended_at: Date | null;
  suspension_reason: string | null;
  scheduled_deletion_at: Date | null;
  grace_days: number | null;
  deletion_immediate: boolean | null;
  /** The operator's hold: while set, a partner's resume answers CONFLICT. */
  held_at: Date | null;
  hold_reason: string | null;
}

/** What stays of a deleted customer, so usage can still bill the window it lived in. */
export interface CustomerTombstonesTable {
  uid: string;
  partner_id: string;
  mode: KeyMode;
  id: string;
  organization: string;
  created_at: Date;
  deleted_at: Date;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface CustomerTables {
  customers: CustomersTable;
  customer_tombstones: CustomerTombstonesTable;
}

/** A row of `customers` as a query answers it. */
export type CustomerRow = Selectable<CustomersTable>;
