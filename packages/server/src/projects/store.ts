import { type Expression, type ExpressionBuilder, expressionBuilder, type QueryCreator, sql } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import type { Page, ScopedCursors } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import { type Project, toProject } from './schemas.ts';
import { PROJECT_STATE } from './state.ts';
import type { ProjectRow, ProjectTables } from './tables.ts';

export type { ProjectRow } from './tables.ts';

export async function insertProject(trx: Db<ProjectTables>, row: ProjectRow): Promise<void> {
  await projectInsert(trx, row).execute();
}

/** Projects' insert: one alone, or a batch of customers' first projects. */
export function projectInsert(qc: QueryCreator<ProjectTables>, rows: ProjectRow | readonly ProjectRow[]) {
  return qc.insertInto('projects').values(rows);
}

/** Of `names`, those that are project namespaces on this platform scope (whoever's). */
export function namespacesTaken(qc: QueryCreator<ProjectTables>, scope: string, names: readonly string[]) {
  return qc
    .selectFrom('projects')
    .select(['namespace', 'name', 'customer_id', 'partner_id'])
    .where('platform_scope', '=', scope)
    .where('namespace', 'in', names);
}

/** What provisioning a project on the platform needs of it (`advanceProject`). */
const PROJECT_FOR_PLATFORM = ['uid', 'name', 'namespace', 'cidr'] as const;
export type ProjectForPlatform = Pick<ProjectRow, (typeof PROJECT_FOR_PLATFORM)[number]>;

/**
 * The customer's project `name` as provisioning needs it, as a subquery another module's statement
 * embeds (a creation's look reads its customer, quota, owner and project in one round trip).
 */
export function projectForPlatformOf(customerUid: Expression<string> | string, name: string) {
  return expressionBuilder<ProjectTables, never>()
    .selectFrom('projects')
    .select(PROJECT_FOR_PLATFORM)
    .where('customer_uid', '=', customerUid)
    .where('name', '=', name);
}

export async function findProject(db: Db<ProjectTables>, customerUid: string, name: string): Promise<ProjectRow | undefined> {
  return db.selectFrom('projects').selectAll().where('customer_uid', '=', customerUid).where('name', '=', name).executeTakeFirst();
}

/** The columns of a project's API view (`toProject`). */
export const PROJECT_VIEW_COLUMNS = ['name', 'state', 'namespace', 'cidr', 'created_at', 'updated_at'] as const;

/**
 * The project, if it is still provisioning, turned `to` (its lock taken by the update), returning its
 * view's columns; nothing when it is not provisioning or gone. Once a creation's commit: two shapes,
 * each compiled once.
 */
function settleProvisioning(to: 'ready' | 'failed') {
  return precompile((trx: Db<ProjectTables>, a: { customerUid: string; name: string; now: Date; cidr: string | null }) =>
    trx
      .updateTable('projects')
      // The address range the look that finished learned, where the project has none yet.
      .set({ state: PROJECT_STATE.move('provisioning', to), updated_at: a.now, cidr: sql<string | null>`coalesce(cidr, ${a.cidr}::text)` })
      .where('customer_uid', '=', a.customerUid)
      .where('name', '=', a.name)
      .where('state', '=', 'provisioning')
      .returning(PROJECT_VIEW_COLUMNS),
  );
}
const settleReady = settleProvisioning('ready');
const settleFailed = settleProvisioning('failed');

export async function settleProvisioningProject(
  trx: Db<ProjectTables>,
  customerUid: string,
  name: string,
  to: 'ready' | 'failed',
  now: Date,
  cidr: string | null,
): Promise<Pick<ProjectRow, (typeof PROJECT_VIEW_COLUMNS)[number]> | undefined> {
  const [row] = (await (to === 'ready' ? settleReady : settleFailed)(trx, { customerUid, name, now, cidr })).rows;
  return row;
}

export async function lockProject(trx: Db<ProjectTables>, customerUid: string, name: string): Promise<ProjectRow | undefined> {
  return trx
    .selectFrom('projects')
    .selectAll()
    .where('customer_uid', '=', customerUid)
    .where('name', '=', name)
    .forUpdate()
    .executeTakeFirst();
}

/** Moves a project's state, by its state machine only. */
export async function setProjectState(trx: Db<ProjectTables>, row: ProjectRow, to: ProjectRow['state'], now: Date): Promise<ProjectRow> {
  return trx
    .updateTable('projects')
    .set({ state: PROJECT_STATE.move(row.state, to), updated_at: now })
    .where('uid', '=', row.uid)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Records the address range the platform reserved for the project (the same one on every repeat). */
export async function recordAddressRange(db: Db<ProjectTables>, uid: string, cidr: string): Promise<void> {
  await recordCidr(db, { uid, cidr });
}

/** Every project's provisioning records its range: compiled once. */
const recordCidr = precompile((db: Db<ProjectTables>, a: { uid: string; cidr: string }) =>
  db.updateTable('projects').set({ cidr: a.cidr }).where('uid', '=', a.uid).where('cidr', 'is', null),
);

export async function removeProject(trx: Db<ProjectTables>, uid: string): Promise<void> {
  await trx.deleteFrom('projects').where('uid', '=', uid).execute();
}

/** How many projects the customer has, as a subquery (a project's create asks it with its other checks). */
export function projectCount(eb: ExpressionBuilder<ProjectTables, never>, customerUid: string) {
  return eb.selectFrom('projects').select(sql<number>`count(*)::int`.as('n')).where('customer_uid', '=', customerUid);
}

/** The customer's project `name`, by name, as a subquery: null when it has none by that name. */
export function projectNamed(eb: ExpressionBuilder<ProjectTables, never>, customerUid: string, name: string) {
  return eb.selectFrom('projects').select('name').where('customer_uid', '=', customerUid).where('name', '=', name);
}

/** Every project of a customer, by name (at most the partner's project limit). */
export async function allProjects(db: Db<ProjectTables>, customerUid: string): Promise<ProjectRow[]> {
  return db.selectFrom('projects').selectAll().where('customer_uid', '=', customerUid).orderBy('name').execute();
}

export async function listProjects(
  db: Db<ProjectTables>,
  cursors: ScopedCursors,
  customerUid: string,
  query: { limit: number; cursor?: string | undefined },
): Promise<Page<Project>> {
  let select = db
    .selectFrom('projects')
    .selectAll()
    .where('customer_uid', '=', customerUid)
    .orderBy('name')
    .limit(query.limit + 1);
  if (query.cursor !== undefined) {
    const [last] = cursors.decode(query.cursor, 'customer-projects', { customer: customerUid });
    select = select.where('name', '>', String(last));
  }
  const rows = await select.execute();
  return toPage(rows, query.limit, toProject, (last) => cursors.encode('customer-projects', { customer: customerUid }, [last.name]));
}
