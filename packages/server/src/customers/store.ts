import type { Selectable } from 'kysely';
import { jsonArrayFrom } from 'kysely/helpers/postgres';
import { releaseQuota } from '../capacity/store.ts';
import type { Db } from '../infra/db/database.ts';
import type { CustomersTable, KeyMode } from '../infra/db/schema.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import type { ProjectRow } from '../projects/store.ts';
import { type Customer, toCustomer } from './schemas.ts';

export type CustomerRow = Selectable<CustomersTable>;

interface Owner {
  partnerId: string;
  mode: KeyMode;
}

export async function findCustomer(db: Db, owner: Owner, id: string): Promise<CustomerRow | undefined> {
  return db
    .selectFrom('customers')
    .selectAll()
    .where('partner_id', '=', owner.partnerId)
    .where('mode', '=', owner.mode)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The customer with its projects (by name), in one read: the single-customer read is a hot path. */
export async function findCustomerWithProjects(
  db: Db,
  owner: Owner,
  id: string,
): Promise<(CustomerRow & { projects: ProjectRow[] }) | undefined> {
  const row = await db
    .selectFrom('customers')
    .selectAll('customers')
    .select((eb) =>
      jsonArrayFrom(
        eb.selectFrom('projects').selectAll('projects').whereRef('projects.customer_uid', '=', 'customers.uid').orderBy('projects.name'),
      ).as('projects'),
    )
    .where('partner_id', '=', owner.partnerId)
    .where('mode', '=', owner.mode)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) return undefined;
  // JSON carries timestamps as strings.
  const projects = row.projects.map((p) => ({ ...p, created_at: new Date(p.created_at), updated_at: new Date(p.updated_at) }));
  return { ...row, projects };
}

/** Reads the customer under a row lock, for a change in the same transaction. */
export async function lockCustomer(trx: Db, owner: Owner, id: string): Promise<CustomerRow | undefined> {
  return trx
    .selectFrom('customers')
    .selectAll()
    .where('partner_id', '=', owner.partnerId)
    .where('mode', '=', owner.mode)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
}

export async function findCustomerByUid(db: Db, uid: string): Promise<CustomerRow | undefined> {
  return db.selectFrom('customers').selectAll().where('uid', '=', uid).executeTakeFirst();
}

export async function lockCustomerByUid(trx: Db, uid: string): Promise<CustomerRow | undefined> {
  return trx.selectFrom('customers').selectAll().where('uid', '=', uid).forUpdate().executeTakeFirst();
}

export async function insertCustomer(trx: Db, row: CustomerRow): Promise<void> {
  await trx.insertInto('customers').values(row).execute();
}

export async function updateCustomer(trx: Db, uid: string, changes: Partial<CustomerRow>): Promise<CustomerRow> {
  return trx.updateTable('customers').set(changes).where('uid', '=', uid).returningAll().executeTakeFirstOrThrow();
}

/** Removes the customer with its projects and users (cascade); its operations stay for their 7 days. */
export async function removeCustomer(trx: Db, row: CustomerRow): Promise<void> {
  await trx.deleteFrom('customers').where('uid', '=', row.uid).execute();
  await adjustCustomerCount(trx, row.partner_id, row.mode, -1);
  // Its quota goes back to the pool with it.
  await releaseQuota(trx, row.partner_id, row.mode, row.quota);
}

export async function adjustCustomerCount(trx: Db, partnerId: string, mode: KeyMode, delta: number): Promise<void> {
  await trx
    .updateTable('partners')
    .set((eb) =>
      mode === 'live'
        ? { customer_count: eb('customer_count', '+', delta) }
        : { test_customer_count: eb('test_customer_count', '+', delta) },
    )
    .where('id', '=', partnerId)
    .execute();
}

export interface CustomerFilters {
  external_id?: string | undefined;
  status?: CustomerRow['status'] | undefined;
}

/** Customers by id; filters apply before paging, each on its own index, so a deep page costs what the first does. */
export async function listCustomers(
  db: Db,
  cursors: CursorCodec,
  owner: Owner,
  filters: CustomerFilters,
  query: { limit: number; cursor?: string | undefined },
): Promise<Page<Customer>> {
  let select = db
    .selectFrom('customers')
    .selectAll()
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
