import type { Db } from '../infra/db/handle.ts';
import { notFound } from '../infra/errors/catalogue.ts';
import type { KeyMode } from '../infra/mode.ts';
import {
  customerIdWithOrganization,
  findCustomer,
  lockCustomer,
  lockCustomerByUid,
  nextScheduledDeletion,
  type UsageSubjectRow,
  usageSubjects,
} from './store.ts';
import type { CustomerRow, CustomerTables } from './tables.ts';

export type { UsageSubjectRow } from './store.ts';

/*
 * What other modules' services and steps read, lock or mark of a customer, on their handle or in their
 * transaction (the customer's own changes are `CustomerService`'s, which asks the same).
 */

type Owner = { partnerId: string; mode: KeyMode };

/**
 * The customer of this partner and mode on the caller's handle, or 404 (another partner's or mode's
 * customer is not found either).
 */
export async function requireCustomer(db: Db<CustomerTables>, owner: Owner, id: string): Promise<CustomerRow> {
  const row = await findCustomer(db, owner, id);
  if (!row) throw notFound(`Customer ${id}`);
  return row;
}

/**
 * `requireCustomer`, its row locked in the caller's transaction: a project's or user's change locks its
 * customer first (lock order everywhere: partner, then customer, then project).
 */
export async function requireCustomerLocked(trx: Db<CustomerTables>, owner: Owner, id: string): Promise<CustomerRow> {
  const row = await lockCustomer(trx, owner, id);
  if (!row) throw notFound(`Customer ${id}`);
  return row;
}

/** A customer by internal identity (an operation names it), whoever's it is, its row locked in the caller's transaction (an operation's outcome commits under it). */
export function lockCustomerOfUid(trx: Db<CustomerTables>, uid: string): Promise<CustomerRow | undefined> {
  return lockCustomerByUid(trx, uid);
}

/** The customer whose platform name is `name` on this platform scope (a project's namespace shares that name space). */
export function customerNamedOnPlatform(db: Db<CustomerTables>, scope: string, name: string): Promise<string | undefined> {
  return customerIdWithOrganization(db, scope, name);
}

/** When the partner's next scheduled deletion of a mode falls due (the test clock walks through due times in order). */
export function nextDeletionDueAt(db: Db<CustomerTables>, partner: { id: string; mode: KeyMode }): Promise<Date | undefined> {
  return nextScheduledDeletion(db, partner);
}

/** The customers usage reports on, a page at a time: every live one, and every one deleted within the window. */
export function usageSubjectsOf(
  db: Db<CustomerTables>,
  owner: Owner,
  window: { from: Date; to: Date },
  after: { id: string; createdAt: Date } | undefined,
  limit: number,
): Promise<UsageSubjectRow[]> {
  return usageSubjects(db, owner, window, after, limit);
}
