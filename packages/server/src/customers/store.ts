import { type AliasableExpression, type Expression, type ExpressionBuilder, sql } from 'kysely';
import { jsonArrayFrom } from 'kysely/helpers/postgres';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { Page, ScopedCursors } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import type { ProjectRow, ProjectTables } from '../projects/tables.ts';
import { CUSTOMER_COLUMNS, type Customer, toCustomer } from './schemas.ts';
import { CUSTOMER_STATUS } from './status.ts';
import type { CustomerRow, CustomerStatus, CustomerTables } from './tables.ts';

/** The single-customer read joins its projects in one statement (the projects module's table). */
type WithProjectsDb = Db<CustomerTables & ProjectTables>;

export type { CustomerRow } from './tables.ts';

interface Owner {
  partnerId: string;
  mode: KeyMode;
}

/** A partner's customer by id: before every change of one, so compiled once. */
const readCustomer = precompile((db: Db<CustomerTables>, a: Owner & { id: string }) =>
  db.selectFrom('customers').selectAll().where('partner_id', '=', a.partnerId).where('mode', '=', a.mode).where('id', '=', a.id),
);

export async function findCustomer(db: Db<CustomerTables>, owner: Owner, id: string): Promise<CustomerRow | undefined> {
  const [row] = (await readCustomer(db, { partnerId: owner.partnerId, mode: owner.mode, id })).rows;
  return row;
}

/**
 * The customer's plan id as the module that owns it answers it, given the customer's uid in the
 * statement that embeds it: a customer's answer shows its plan, read in the customer's own statement.
 */
export type PlanIdOf = (customerUid: Expression<string>) => AliasableExpression<string>;

/**
 * The one statement behind `GET /customers/{id}`: the customer with its plan id and its projects (by
 * name) as a JSON array. The bench's raw-SELECT floor runs the very same statement.
 */
export function customerWithProjectsQuery(db: WithProjectsDb, planIdOf: PlanIdOf, owner: Owner, id: string) {
  return db
    .selectFrom('customers')
    .selectAll('customers')
    .select((eb) => [
      planIdOf(eb.ref('customers.uid')).as('plan_id'),
      jsonArrayFrom(
        eb.selectFrom('projects').selectAll('projects').whereRef('projects.customer_uid', '=', 'customers.uid').orderBy('projects.name'),
      ).as('projects'),
    ])
    .where('partner_id', '=', owner.partnerId)
    .where('mode', '=', owner.mode)
    .where('id', '=', id);
}

export type CustomerWithProjectsRow = CustomerRow & { plan_id: string; projects: ProjectRow[] };

/**
 * The reader of a customer with its plan and projects, in one statement compiled once (`GET
 * /customers/{id}` runs thousands of times a second).
 */
export function customerWithProjectsReader(planIdOf: PlanIdOf) {
  const read = precompile((query: WithProjectsDb, args: Owner & { id: string }) =>
    customerWithProjectsQuery(query, planIdOf, args, args.id),
  );
  return async (db: WithProjectsDb, owner: Owner, id: string): Promise<CustomerWithProjectsRow | undefined> => {
    const [row] = (await read(db, { partnerId: owner.partnerId, mode: owner.mode, id })).rows;
    if (!row) return undefined;
    // JSON carries timestamps as strings.
    const projects = row.projects.map((p) => ({ ...p, created_at: new Date(p.created_at), updated_at: new Date(p.updated_at) }));
    return { ...row, projects };
  };
}

/** Reads the customer under a row lock, for a change in the same transaction. */
export async function lockCustomer(trx: Db<CustomerTables>, owner: Owner, id: string): Promise<CustomerRow | undefined> {
  return trx
    .selectFrom('customers')
    .selectAll()
    .where('partner_id', '=', owner.partnerId)
    .where('mode', '=', owner.mode)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
}

export async function findCustomerByUid(db: Db<CustomerTables>, uid: string): Promise<CustomerRow | undefined> {
  return db.selectFrom('customers').selectAll().where('uid', '=', uid).executeTakeFirst();
}

export async function lockCustomerByUid(trx: Db<CustomerTables>, uid: string): Promise<CustomerRow | undefined> {
  return trx.selectFrom('customers').selectAll().where('uid', '=', uid).forUpdate().executeTakeFirst();
}

/** New customers, in one insert. */
export async function insertCustomers(trx: Db<CustomerTables>, rows: readonly CustomerRow[]): Promise<void> {
  await trx.insertInto('customers').values(rows).execute();
}

/**
 * Of `ids`, those the partner already has in this mode; of `names`, those that are organizations on
 * this platform scope (whoever's), with the customer holding each: in one statement.
 */
export async function customerNamesTaken(
  db: Db<CustomerTables>,
  owner: Owner & { scope: string },
  ids: readonly string[],
  names: readonly string[],
): Promise<{ ids: string[]; organizations: { organization: string; id: string; partner_id: string }[] }> {
  const [row] = await db
    .selectNoFrom((eb) => [
      jsonArrayFrom(
        eb
          .selectFrom('customers')
          .select('id')
          .where('partner_id', '=', owner.partnerId)
          .where('mode', '=', owner.mode)
          .where('id', 'in', ids),
      ).as('ids'),
      jsonArrayFrom(
        eb
          .selectFrom('customers')
          .select(['organization', 'id', 'partner_id'])
          .where('platform_scope', '=', owner.scope)
          .where('organization', 'in', names),
      ).as('organizations'),
    ])
    .execute();
  if (!row) throw new Error('a select without FROM answered no row');
  return { ids: row.ids.map((r) => r.id), organizations: row.organizations };
}

/** Any change but the status, which moves only through `setCustomerStatus`. */
export type CustomerChanges = Partial<Omit<CustomerRow, 'uid' | 'status'>>;

export async function updateCustomer(trx: Db<CustomerTables>, uid: string, changes: CustomerChanges): Promise<CustomerRow> {
  return trx.updateTable('customers').set(changes).where('uid', '=', uid).returningAll().executeTakeFirstOrThrow();
}

/** Moves a customer's status by its state machine, with whatever else changes with it. */
export async function setCustomerStatus(
  trx: Db<CustomerTables>,
  row: CustomerRow,
  to: CustomerStatus,
  changes: CustomerChanges = {},
): Promise<CustomerRow> {
  return trx
    .updateTable('customers')
    .set({ ...changes, status: CUSTOMER_STATUS.move(row.status, to) })
    .where('uid', '=', row.uid)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * A customer's creation settles it: `active` or `failed`, only from
 * `provisioning`. The update takes the customer's lock and finds the row only while it is still
 * provisioning. Once a creation's commit: two shapes, each compiled once.
 */
function settleProvisioning(to: 'active' | 'failed') {
  return precompile((trx: Db<CustomerTables>, a: { uid: string; now: Date }) =>
    trx
      .updateTable('customers')
      .set({ status: CUSTOMER_STATUS.move('provisioning', to), updated_at: a.now })
      .where('uid', '=', a.uid)
      .where('status', '=', 'provisioning')
      .returningAll(),
  );
}
const settleActive = settleProvisioning('active');
const settleFailed = settleProvisioning('failed');

export async function settleProvisioningCustomer(
  trx: Db<CustomerTables>,
  uid: string,
  to: 'active' | 'failed',
  now: Date,
): Promise<CustomerRow | undefined> {
  const [row] = (await (to === 'active' ? settleActive : settleFailed)(trx, { uid, now })).rows;
  return row;
}

/**
 * Removes the customer with its projects and users (cascade) and keeps a tombstone (usage bills the
 * window it lived in); its operations stay for their 7 days. Its quota (before) and its count (after) go
 * back to the partner through capacity and partners.
 */
export async function removeCustomer(trx: Db<CustomerTables>, row: CustomerRow, deletedAt: Date): Promise<void> {
  await trx.deleteFrom('customers').where('uid', '=', row.uid).execute();
  await trx
    .insertInto('customer_tombstones')
    .values({
      uid: row.uid,
      partner_id: row.partner_id,
      mode: row.mode,
      id: row.id,
      organization: row.organization,
      created_at: row.created_at,
      deleted_at: deletedAt,
    })
    .onConflict((oc) => oc.column('uid').doNothing())
    .execute();
}

/** Customers of a partner's mode whose grace period has ended on that mode's clock. */
export async function graceEnded(
  db: Db<CustomerTables>,
  now: Date,
  limit: number,
  partner?: { id: string; mode: KeyMode },
): Promise<string[]> {
  const result = await sql<{ uid: string }>`
    select c.uid from customers c join partners p on p.id = c.partner_id
    where c.status = 'deletion_scheduled'
      and c.scheduled_deletion_at <= ${now}::timestamptz + (case when c.mode = 'test' then p.test_clock_offset_ms else 0 end) * interval '1 millisecond'
      ${partner ? sql`and c.partner_id = ${partner.id} and c.mode = ${partner.mode}` : sql``}
    limit ${limit}`.execute(db);
  return result.rows.map((row) => row.uid);
}

/** The earliest scheduled deletion of a partner's mode (the test clock walks through due times in order). */
export async function nextScheduledDeletion(db: Db<CustomerTables>, partner: { id: string; mode: KeyMode }): Promise<Date | undefined> {
  const row = await db
    .selectFrom('customers')
    .select((eb) => eb.fn.min('scheduled_deletion_at').as('at'))
    .where('partner_id', '=', partner.id)
    .where('mode', '=', partner.mode)
    .where('status', '=', 'deletion_scheduled')
    .executeTakeFirst();
  return row?.at ? new Date(row.at as unknown as string | Date) : undefined;
}

/**
 * The id of the customer whose organization (its platform name) is `name` on this platform scope, as a
 * subquery: a create checks it in one statement with its other checks.
 */
export function customerIdByOrganization(eb: ExpressionBuilder<CustomerTables, never>, scope: string, name: string) {
  return eb.selectFrom('customers').select('id').where('platform_scope', '=', scope).where('organization', '=', name);
}

/** The id of the customer whose organization (its platform name) is `name` on this platform scope. */
export async function customerIdWithOrganization(db: Db<CustomerTables>, scope: string, name: string): Promise<string | undefined> {
  return (await db.selectNoFrom((eb) => customerIdByOrganization(eb, scope, name).as('id')).executeTakeFirst())?.id ?? undefined;
}

/** A customer usage reports on: a live one, or one deleted within the window (usage still bills it). */
export interface UsageSubjectRow {
  id: string;
  organization: string;
  created_at: Date;
  deleted_at: Date | null;
}

/**
 * A page of a partner's mode's customers for usage, by id (then creation, so a deleted customer and
 * a later one of the same id are both listed): every live customer, and every deleted one that
 * lived within [from, to).
 */
export async function usageSubjects(
  db: Db<CustomerTables>,
  owner: Owner,
  window: { from: Date; to: Date },
  after: { id: string; createdAt: Date } | undefined,
  limit: number,
): Promise<UsageSubjectRow[]> {
  const past = after ? sql`and (id, created_at) > (${after.id}, ${after.createdAt}::timestamptz)` : sql``;
  const result = await sql<UsageSubjectRow>`
    (select id, organization, created_at, null::timestamptz as deleted_at from customers
      where partner_id = ${owner.partnerId} and mode = ${owner.mode} ${past}
      order by id, created_at limit ${limit})
    union all
    (select id, organization, created_at, deleted_at from customer_tombstones
      where partner_id = ${owner.partnerId} and mode = ${owner.mode} and deleted_at > ${window.from} and created_at < ${window.to} ${past}
      order by id, created_at limit ${limit})
    order by id, created_at limit ${limit}`.execute(db);
  return result.rows;
}

export interface CustomerFilters {
  external_id?: string | undefined;
  status?: CustomerRow['status'] | undefined;
}

/** Customers by id; filters apply before paging, each on its own index, so a deep page costs what the first does. */
export async function listCustomers(
  db: Db<CustomerTables>,
  cursors: ScopedCursors,
  owner: Owner,
  filters: CustomerFilters,
  query: { limit: number; cursor?: string | undefined },
  planIdOf: PlanIdOf,
): Promise<Page<Customer>> {
  let select = db
    .selectFrom('customers')
    .select(CUSTOMER_COLUMNS)
    .select((eb) => planIdOf(eb.ref('customers.uid')).as('plan_id'))
    .where('partner_id', '=', owner.partnerId)
    .where('mode', '=', owner.mode)
    .orderBy('id')
    .limit(query.limit + 1);
  if (filters.external_id !== undefined) select = select.where('external_id', '=', filters.external_id);
  if (filters.status !== undefined) select = select.where('status', '=', filters.status);
  if (query.cursor !== undefined) {
    const [lastId] = cursors.decode(query.cursor, 'customers', { ...filters });
    select = select.where('id', '>', String(lastId));
  }
  const rows = await select.execute();
  return toPage(rows, query.limit, toCustomer, (last) => cursors.encode('customers', { ...filters }, [last.id]));
}
