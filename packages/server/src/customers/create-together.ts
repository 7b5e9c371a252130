import { sql } from 'kysely';
import type { Db } from '../app/database.ts';
import type { NewCustomerQuota } from '../capacity/quotas.ts';
import { precompile } from '../infra/db/precompiled.ts';
import type { KeyMode } from '../infra/mode.ts';
import { operationInsert, operationInsertMany } from '../operations/store.ts';
import type { Tenant } from '../platform/tenant.ts';
import { projectInsert, projectInsertMany } from '../projects/store.ts';
import { userInsert, userInsertMany } from '../users/store.ts';
import type { CreateCustomerRequest } from './schemas.ts';
import type { NewCustomerRows } from './service.ts';
import { customerInsert, customerInsertMany } from './store.ts';

/** A create as it waits for its partner's next statement: its rows, names and the quota it asks. */
export interface PendingCreate {
  tenant: Tenant;
  request: CreateCustomerRequest;
  rows: NewCustomerRows;
  organization: string;
  namespace: string;
  /** The default plan the create was given (no plan asked), to be checked under the lock; null when it asked for one. */
  defaultPlanId: string | null;
  wanted: NewCustomerQuota;
}

/** SQLSTATE of `customers_create_locked` (migration 0041): a check did not plainly pass; nothing was written. */
const CREATE_NEEDS_TRANSACTION = 'TN002';

/**
 * A new customer's rows (the customer, its owner, its first project and its `customer.create`
 * operation) as the first parts of a statement, to be followed by what the create does under its
 * partner's lock. PostgreSQL runs the parts of a statement that nothing reads last, so the part that
 * takes the lock asks for each row part's answer (`NEW_ROWS_WRITTEN`): the rows are written before it
 * waits, and a clash of ids or names fails without waiting for the partner's other creates (decision 239).
 */
export function withNewCustomerRows(db: Db, rows: NewCustomerRows) {
  return db
    .with('customer', (qc) => customerInsert(qc, rows.customer).returning('uid'))
    .with('owner', (qc) => userInsert(qc, rows.owner).returning('uid'))
    .with('project', (qc) => projectInsert(qc, rows.project).returning('uid'))
    .with('operation', (qc) => operationInsert(qc, rows.operation).returning('id'));
}

/** `withNewCustomerRows` for several customers, each table's rows in one insert from a JSON array. */
function withNewCustomersRows(db: Db, rows: { customers: string; owners: string; projects: string; operations: string }) {
  return db
    .with('customer', (qc) => customerInsertMany(qc, rows.customers).returning('uid'))
    .with('owner', (qc) => userInsertMany(qc, rows.owners).returning('uid'))
    .with('project', (qc) => projectInsertMany(qc, rows.projects).returning('uid'))
    .with('operation', (qc) => operationInsertMany(qc, rows.operations).returning('id'));
}

export const NEW_ROWS_WRITTEN = sql<boolean>`exists (select from customer) and exists (select from owner) and exists (select from project) and exists (select from operation)`;

/** What `customers_create_locked` takes of a batch (one create or several). */
interface LockedCreates {
  partnerId: string;
  mode: KeyMode;
  scope: string;
  operationIds: string[];
  organizations: string[];
  namespaces: string[];
  defaultPlanIds: (string | null)[];
  quotasJson: string;
  poolJson: string;
}

/** The part of a create's statement that runs after its rows are written: the function that takes the partner's lock. */
function lockedCreates(rows: ReturnType<typeof withNewCustomerRows>, a: LockedCreates) {
  return rows
    .selectNoFrom(
      sql<boolean>`customers_create_locked(${a.partnerId}, ${a.mode}, ${a.scope}, ${a.operationIds}::text[], ${a.organizations}::text[], ${a.namespaces}::text[], ${a.defaultPlanIds}::text[], ${a.quotasJson}::jsonb, ${a.poolJson}::jsonb)`.as(
        'created',
      ),
    )
    .where(NEW_ROWS_WRITTEN);
}

/**
 * New customers of a partner and mode in one statement committed on its own (decisions 241, 259):
 * their rows first (nobody sees them before the commit, and a clash of ids or names fails on a unique
 * key before any lock is waited for), then `customers_create_locked` (migration 0041), which counts them
 * on the partner's row, writes the new allocation where their quotas fit (the capacity lock) and checks
 * what the transaction checks, with snapshots taken after the lock. A partner's creates still take its
 * row in turn, but a batch of them takes it once, and commits once. Two shapes, each compiled once: one
 * create's rows as values (the common case, cheapest for PostgreSQL to take), several creates' as JSON
 * arrays (one text for any number; `jsonb_populate_recordset` costs about 0.2 ms more for one create).
 */
const rowsThenLockedCreate = precompile((db: Db, a: NewCustomerRows & LockedCreates) => lockedCreates(withNewCustomerRows(db, a), a), {
  rows: ['customer', 'owner', 'project', 'operation'],
});
const rowsThenLockedCreates = precompile(
  (db: Db, a: LockedCreates & { customers: string; owners: string; projects: string; operations: string }) =>
    lockedCreates(withNewCustomersRows(db, a), a),
);

/**
 * Creates the customers of `creates` (one partner, one mode) in one statement: true when all are
 * created, false when a check did not plainly pass for the batch, or its creates read different pools,
 * and nothing was written (the caller then looks at each create on its own). A clash of ids or names
 * throws the unique key's violation, as the transaction's insert does.
 */
export async function createdTogether(db: Db, creates: readonly PendingCreate[]): Promise<boolean> {
  const [first] = creates;
  if (!first) return true;
  const poolJson = JSON.stringify(first.wanted.pool);
  if (creates.some((create) => JSON.stringify(create.wanted.pool) !== poolJson)) return false;
  const { tenant } = first;
  try {
    const locked: LockedCreates = {
      partnerId: tenant.partnerId,
      mode: tenant.mode,
      scope: tenant.scope,
      operationIds: creates.map((create) => create.rows.operation.id),
      organizations: creates.map((create) => create.organization),
      namespaces: creates.map((create) => create.namespace),
      defaultPlanIds: creates.map((create) => create.defaultPlanId),
      quotasJson: JSON.stringify(creates.map((create) => create.wanted.quota)),
      poolJson,
    };
    const { rows } =
      creates.length === 1
        ? await rowsThenLockedCreate(db, { ...first.rows, ...locked })
        : await rowsThenLockedCreates(db, {
            ...locked,
            customers: JSON.stringify(creates.map((create) => create.rows.customer)),
            owners: JSON.stringify(creates.map((create) => create.rows.owner)),
            projects: JSON.stringify(creates.map((create) => create.rows.project)),
            operations: JSON.stringify(creates.map((create) => create.rows.operation)),
          });
    const [answer] = rows;
    // The inserts always answer their rows, so the function always runs: anything else is a bug.
    if (answer?.created !== true) throw new Error("a create's statement answered no row");
    return true;
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code === CREATE_NEEDS_TRANSACTION) return false;
    throw error;
  }
}
