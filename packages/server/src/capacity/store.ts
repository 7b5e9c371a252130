import { type Expression, expressionBuilder, type QueryCreator, type Selectable, sql } from 'kysely';
import { jsonObjectFrom } from 'kysely/helpers/postgres';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import type { KeyMode } from '../infra/mode.ts';
import { type Resources, ZERO } from './resources.ts';
import type { CapacityTables, CustomerQuotasTable, PlansTable } from './tables.ts';

/**
 * A partner's pool and per-customer maximum until the operator sets them (`tenantry capacity set`):
 * enough for the default 100 customers on the `standard` plan, with a few GPUs to try the GPU plans.
 */
export const DEFAULT_POOL: Resources = {
  vcpu: 1_000,
  memory_gib: 4_000,
  storage_gib: 50_000,
  gpus: { 'a100-40gb': 8, 'h100-80gb': 4, 'l4-24gb': 8 },
};
export const DEFAULT_PER_CUSTOMER_MAX: Resources = {
  vcpu: 64,
  memory_gib: 512,
  storage_gib: 4_096,
  gpus: { 'a100-40gb': 4, 'h100-80gb': 2, 'l4-24gb': 4 },
};

export interface CapacitySettings {
  pool: Resources;
  perCustomerMax: Resources;
  /** Plans the partner may assign. */
  plans: string[];
  /** GPU profiles the partner may grant. */
  gpuProfiles: string[];
}

export type PlanRow = Selectable<PlansTable>;
export type CustomerQuotaRow = Selectable<CustomerQuotasTable>;

export async function listGpuProfiles(db: Db<CapacityTables>) {
  return db.selectFrom('gpu_profiles').selectAll().orderBy('name').execute();
}

export async function findPlan(db: Db<CapacityTables>, id: string): Promise<PlanRow | undefined> {
  return db.selectFrom('plans').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The operator's capacity settings of a partner as stored (undefined: all defaults). */
export async function findCapacityRow(db: Db<CapacityTables>, partnerId: string) {
  return db.selectFrom('partner_capacity').selectAll().where('partner_id', '=', partnerId).executeTakeFirst();
}

/**
 * What a new customer's plan needs, in one read: the partner's capacity settings as
 * stored (null: all defaults) and the plan's quota (null: no such plan).
 */
export async function findCapacityAndPlanQuota(db: Db<CapacityTables>, partnerId: string, planId: string) {
  const [row] = (await capacityAndPlanQuota(db, { partnerId, planId })).rows;
  if (!row) throw new Error('a select without FROM answered no row');
  return row;
}

/** Every customer's create reads it: compiled once. */
const capacityAndPlanQuota = precompile((db: Db<CapacityTables>, a: { partnerId: string; planId: string }) =>
  db.selectNoFrom((eb) => [
    jsonObjectFrom(
      eb.selectFrom('partner_capacity').select(['pool', 'per_customer_max', 'plans', 'gpu_profiles']).where('partner_id', '=', a.partnerId),
    ).as('capacity'),
    eb.selectFrom('plans').select('quota').where('id', '=', a.planId).as('plan_quota'),
  ]),
);

/** A partner's settings, the defaults filled in (a missing list means the whole catalogue). */
export async function capacitySettings(db: Db<CapacityTables>, partnerId: string): Promise<CapacitySettings> {
  const [row, plans, profiles] = await Promise.all([
    findCapacityRow(db, partnerId),
    db.selectFrom('plans').select('id').orderBy('id').execute(),
    db.selectFrom('gpu_profiles').select('name').orderBy('name').execute(),
  ]);
  return {
    pool: row?.pool ?? DEFAULT_POOL,
    perCustomerMax: row?.per_customer_max ?? DEFAULT_PER_CUSTOMER_MAX,
    plans: row?.plans ?? plans.map((p) => p.id),
    gpuProfiles: row?.gpu_profiles ?? profiles.map((p) => p.name),
  };
}

/** Writes the settings the operator changed (the others keep their values or defaults). */
export async function saveCapacitySettings(
  trx: Db<CapacityTables>,
  partnerId: string,
  settings: CapacitySettings,
  now: Date,
): Promise<void> {
  const values = {
    pool: JSON.stringify(settings.pool),
    per_customer_max: JSON.stringify(settings.perCustomerMax),
    plans: settings.plans,
    gpu_profiles: settings.gpuProfiles,
    updated_at: now,
  };
  await trx
    .insertInto('partner_capacity')
    .values({ partner_id: partnerId, ...values })
    .onConflict((oc) => oc.column('partner_id').doUpdateSet(values))
    .execute();
}

export class LockNotAvailable extends Error {}

/**
 * Locks what the partner's customers of this mode hold (the capacity lock: every quota, plan,
 * creation and teardown of the partner and mode takes it) and returns it. `nowaitMs` bounds the wait:
 * past it, LockNotAvailable (a quota or plan change answers BUSY rather than queueing).
 */
export async function lockAllocation(trx: Db<CapacityTables>, partnerId: string, mode: KeyMode, nowaitMs?: number): Promise<Resources> {
  if (nowaitMs !== undefined) await sql`select set_config('lock_timeout', ${`${nowaitMs}ms`}, true)`.execute(trx);
  let row: { allocated: Resources };
  try {
    row = await allocationLock(trx, partnerId, mode).executeTakeFirstOrThrow();
  } catch (error) {
    // The transaction is aborted either way; lock_not_available is the one we explain.
    if ((error as { code?: string }).code === '55P03') throw new LockNotAvailable();
    throw error;
  }
  if (nowaitMs !== undefined) await sql`select set_config('lock_timeout', '0', true)`.execute(trx);
  return row.allocated;
}

/**
 * The capacity lock as one statement, to run alone (`lockAllocation`) or as a part of a create's
 * statement: it makes the row if it is missing and locks it (an update that changes
 * nothing), and answers what is allocated, as of the latest commit whatever the statement's snapshot.
 */
export function allocationLock(qc: QueryCreator<CapacityTables>, partnerId: string, mode: KeyMode) {
  return qc
    .insertInto('capacity_allocations')
    .values({ partner_id: partnerId, mode, allocated: JSON.stringify(ZERO) })
    .onConflict((oc) => oc.columns(['partner_id', 'mode']).doUpdateSet({ allocated: sql`capacity_allocations.allocated` }))
    .returning(['partner_id', 'allocated']);
}

export async function saveAllocation(trx: Db<CapacityTables>, partnerId: string, mode: KeyMode, allocated: Resources): Promise<void> {
  await allocationSave(trx, partnerId, mode, JSON.stringify(allocated)).execute();
}

/**
 * Writes what is allocated (the capacity lock held; `allocatedJson` is the `Resources` as JSON text), to
 * run alone or as a part of a create's statement.
 */
export function allocationSave(qc: QueryCreator<CapacityTables>, partnerId: string, mode: KeyMode, allocatedJson: string) {
  return qc
    .updateTable('capacity_allocations')
    .set({ allocated: allocatedJson })
    .where('partner_id', '=', partnerId)
    .where('mode', '=', mode);
}

/** A customer's plan and quota, or undefined. */
export async function findCustomerQuota(db: Db<CapacityTables>, customerUid: string): Promise<CustomerQuotaRow | undefined> {
  return db.selectFrom('customer_quotas').selectAll().where('customer_uid', '=', customerUid).executeTakeFirst();
}

/** Reads a customer's plan and quota under a row lock, for a change in the same transaction. */
export async function lockCustomerQuota(trx: Db<CapacityTables>, customerUid: string): Promise<CustomerQuotaRow | undefined> {
  return trx.selectFrom('customer_quotas').selectAll().where('customer_uid', '=', customerUid).forUpdate().executeTakeFirst();
}

export async function insertCustomerQuotas(trx: Db<CapacityTables>, rows: readonly CustomerQuotaRow[]): Promise<void> {
  if (rows.length > 0) await trx.insertInto('customer_quotas').values(rows).execute();
}

export type CustomerQuotaChanges = Partial<Pick<CustomerQuotaRow, 'plan_id' | 'quota' | 'quota_revision' | 'project_caps'>>;

export async function updateCustomerQuota(trx: Db<CapacityTables>, customerUid: string, changes: CustomerQuotaChanges) {
  return trx.updateTable('customer_quotas').set(changes).where('customer_uid', '=', customerUid).returningAll().executeTakeFirstOrThrow();
}

/** Deletes a customer's quota row and answers what it held (undefined: no row). */
export async function deleteCustomerQuota(trx: Db<CapacityTables>, customerUid: string): Promise<Resources | undefined> {
  const row = await trx.deleteFrom('customer_quotas').where('customer_uid', '=', customerUid).returning('quota').executeTakeFirst();
  return row?.quota;
}

/**
 * A customer's plan id as a scalar subquery of another statement, given the expression of the
 * customer's uid there: it needs no query creator, so any module's statement can embed it.
 */
export function planIdOf(customerUid: Expression<string>) {
  return expressionBuilder<CapacityTables, never>()
    .selectFrom('customer_quotas')
    .select('plan_id')
    .where('customer_uid', '=', customerUid)
    .$asScalar();
}

/** A customer's plan, quota and caps as the platform takes them, as a subquery of another statement. */
export function quotaForPlatformOf(customerUid: Expression<string> | string) {
  return expressionBuilder<CapacityTables, never>()
    .selectFrom('customer_quotas')
    .select(['plan_id', 'quota', 'project_caps'])
    .where('customer_uid', '=', customerUid);
}

/** Customers' quotas the platform has not taken yet and that are due a try: a new revision at once, a refused one after its backoff. */
export async function quotasNotApplied(db: Db<CapacityTables>, now: Date, limit: number): Promise<CustomerQuotaRow[]> {
  return db
    .selectFrom('customer_quotas')
    .selectAll()
    .where(sql<boolean>`quota_applied_revision is distinct from quota_revision`)
    .where((eb) =>
      eb.or([
        sql<boolean>`quota_retry_revision is distinct from quota_revision`,
        eb('quota_retry_at', 'is', null),
        eb('quota_retry_at', '<=', now),
      ]),
    )
    .orderBy(sql`quota_retry_at nulls first`)
    .limit(limit)
    .execute();
}

/** The platform did not take this revision: try again at `at` (the count and the reason say how it goes). */
export async function markQuotaRetry(
  db: Db<CapacityTables>,
  customerUid: string,
  revision: number,
  retry: { at: Date; count: number; problem: string },
): Promise<void> {
  await db
    .updateTable('customer_quotas')
    .set({
      quota_retry_revision: revision,
      quota_retry_at: retry.at,
      quota_retry_count: retry.count,
      quota_retry_problem: retry.problem.slice(0, 500),
    })
    .where('customer_uid', '=', customerUid)
    .execute();
}

/** The platform must take the customer's quota again: the quota sweep applies it. */
export async function markQuotaToReapply(db: Db<CapacityTables>, customerUid: string): Promise<void> {
  await db.updateTable('customer_quotas').set({ quota_applied_revision: null }).where('customer_uid', '=', customerUid).execute();
}

export async function markQuotaApplied(db: Db<CapacityTables>, customerUid: string, revision: number): Promise<void> {
  await db
    .updateTable('customer_quotas')
    .set({
      quota_applied_revision: revision,
      quota_retry_revision: null,
      quota_retry_at: null,
      quota_retry_count: 0,
      quota_retry_problem: null,
    })
    .where('customer_uid', '=', customerUid)
    .where('quota_revision', '=', revision)
    .execute();
}
