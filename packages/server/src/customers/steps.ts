import { jsonObjectFrom } from 'kysely/helpers/postgres';
import type { Logger } from 'pino';
import { applyQuota, customerQuotaForPlatform, pendingQuotas, quotaSpec, releaseCustomerQuota } from '../capacity/customer-quotas.ts';
import type { CapacityTables } from '../capacity/tables.ts';
import { type EventData, newEvent } from '../events/payloads.ts';
import type { EventTables } from '../events/tables.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import { modeNowMs } from '../infra/mode.ts';
import type { OperationEngine } from '../operations/engine.ts';
import { type FinalOutcome, fail, inOrder } from '../operations/handler.ts';
import type { OperationRow, OperationTables } from '../operations/tables.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import { countPartnerCustomers, lockPartner } from '../partners/service.ts';
import type { PartnerTables } from '../partners/tables.ts';
import type { Platform } from '../platform/platform.ts';
import type { Project } from '../projects/schemas.ts';
import { projectForPlatform } from '../projects/service.ts';
import { advanceProject, keepAddressRange, projectRef, settleFirstProject } from '../projects/steps.ts';
import type { ProjectTables } from '../projects/tables.ts';
import { ownerForPlatform, ownerMadeReady, type UserService, userSpec } from '../users/service.ts';
import type { UserTables } from '../users/tables.ts';
import { organizationRef, startTeardown } from './lifecycle.ts';
import { type CustomerRow, findCustomerByUid, graceEnded, lockCustomerByUid, removeCustomer, settleProvisioningCustomer } from './store.ts';
import type { CustomerTables } from './tables.ts';

/** A customer's steps settle its project, owner, partner count, operation and event with it. */
type StepsTables = CustomerTables & ProjectTables & PartnerTables & UserTables & EventTables & OperationTables & CapacityTables;
type StepsDb = Db<StepsTables>;

export interface CustomerStepDeps {
  db: StepsDb;
  clock: Clock;
  logger: Logger;
  platform: Platform;
  users: UserService;
  partnerCache: PartnerCache;
}

interface Locked {
  customer: CustomerRow | undefined;
}

/**
 * The customer being created with its quota, owner and first project as the platform needs them, each
 * part the subquery of the module that owns it: one read, compiled once.
 */
const readForCreation = precompile((db: StepsDb, a: { uid: string; project: string }) =>
  db
    .selectFrom('customers')
    .selectAll()
    .select(jsonObjectFrom(customerQuotaForPlatform(a.uid)).as('quota'))
    .select(jsonObjectFrom(ownerForPlatform(a.uid)).as('owner'))
    .select(jsonObjectFrom(projectForPlatform(a.uid, a.project)).as('project'))
    .where('uid', '=', a.uid),
);

/**
 * The customer, still provisioning, settles with its creation: `to` (its lock taken by the update), then
 * its first project (with the address range the look learned, if it has none yet) and, when it
 * succeeded, its owner, through their modules in the same transaction (lock order customer, then
 * project). Undefined when the customer is no longer provisioning; else its status with the project's view.
 */
async function settleCreation(
  trx: StepsDb,
  a: { uid: string; project: string; ok: boolean; now: Date; cidr: string | null },
): Promise<{ status: CustomerRow['status']; project: Project | null } | undefined> {
  const settled = await settleProvisioningCustomer(trx, a.uid, a.ok ? 'active' : 'failed', a.now);
  if (!settled) return undefined;
  const project = await settleFirstProject(trx, a.uid, a.project, a.ok, a.now, a.cidr);
  if (a.ok) await ownerMadeReady(trx, a.uid, a.now);
  return { status: settled.status, project };
}

/** The event announcing a creation's end: `customer.ready` or `customer.failed`, with the first project's view. */
function creationEvent(
  op: OperationRow,
  final: FinalOutcome,
  state: EventData<'customer.ready'>['state'],
  project: Project | null,
  at: Date,
) {
  return newEvent({
    partnerId: op.partner_id,
    mode: op.mode,
    type: final.state === 'done' ? 'customer.ready' : 'customer.failed',
    at,
    data: {
      customer_id: op.customer_id,
      operation_id: op.id,
      project,
      state,
      error: final.state === 'failed' ? { code: final.code, message: final.message } : null,
    },
  });
}

/** The first project's address range a finished look learned (`provisionCustomer`), for the commit to write. */
const learnedRange = (outcome: FinalOutcome): string | null => (outcome.state === 'done' ? (outcome.learned?.cidr ?? null) : null);

/**
 * `customer.create` and `customer.delete`, and the sweeps that start a teardown when a grace period
 * ends and apply a quota the platform has not taken yet: registered with the operation engine.
 */
export function registerCustomerSteps(engine: OperationEngine<StepsTables>, deps: CustomerStepDeps): void {
  const { db, platform, users, partnerCache } = deps;

  engine.register('customer.create', {
    // The organization, its plan and quota, the owner admin (once the organization exists), then the first project.
    async advance(op, ctx) {
      // The customer with its quota, owner and first project as the platform needs them.
      const [found] = (await readForCreation(db, { uid: op.customer_uid, project: op.project ?? 'default' })).rows;
      if (!found?.quota) return fail('CUSTOMER_DELETED');
      const { quota, owner, project, ...customer } = found;
      if (customer.status !== 'provisioning') return fail('CUSTOMER_DELETING');
      const org = organizationRef(customer);
      const organization = { ...org, displayName: customer.display_name, planId: quota.plan_id };
      // The whole customer in one call where the driver takes it so; else one call at a time.
      if (owner && project) {
        const whole = await platform.provisionCustomer?.(ctx, {
          organization,
          quota: quotaSpec(quota),
          owner: userSpec(customer, owner),
          project: projectRef(customer, project),
        });
        // Done: the range is written with the outcome (`settleCreation`); not yet: now, as the calls would.
        if (whole?.state === 'done') return { state: 'done', learned: { cidr: whole.cidr } };
        if (whole) {
          if (whole.cidr) await keepAddressRange(db, project, whole.cidr);
          return { state: 'in_progress', until: whole.until };
        }
      }
      return inOrder(
        () => platform.ensureOrganization(ctx, organization),
        () => platform.applyQuota(ctx, org, quotaSpec(quota)),
        () => users.ensureOwner(ctx, customer, owner),
        async () => {
          if (!project) return fail('PROVISIONING_FAILED', `Project ${op.project} no longer exists.`);
          return advanceProject(db, platform, ctx, customer, project);
        },
      );
    },
    // The customer's lock is the settling update's (below), or, when it is no longer provisioning, taken then.
    lock: async () => undefined,
    async finish(trx, op, outcome, ctx) {
      let final: FinalOutcome = outcome;
      // The customer settles with its creation, its first project and a ready one's owner with it, only
      // while it is still provisioning.
      const projectName = op.project ?? 'default';
      const cidr = learnedRange(final);
      const settled = await settleCreation(trx, {
        uid: op.customer_uid,
        project: projectName,
        ok: final.state === 'done',
        now: ctx.now,
        cidr,
      });
      let state: EventData<'customer.ready'>['state'];
      let project: Project | null = null;
      if (settled) {
        state = settled.status;
        project = settled.project;
      } else {
        // Deleted, or being deleted, while this look ran: its creation ends with that.
        const customer = await lockCustomerByUid(trx, op.customer_uid);
        if (final.state === 'done') final = fail(customer ? 'CUSTOMER_DELETING' : 'CUSTOMER_DELETED');
        state = customer?.status ?? 'deleted';
        if (customer) project = await settleFirstProject(trx, customer.uid, projectName, false, ctx.now, cidr);
      }
      return { outcome: final, event: creationEvent(op, final, state, project, ctx.now) };
    },
  });

  engine.register<Locked>('customer.delete', {
    // Workloads stop first, then the organization goes with everything in it; done once it is gone.
    async advance(op, ctx) {
      const customer = await findCustomerByUid(db, op.customer_uid);
      if (!customer) return { state: 'done' };
      const org = organizationRef(customer);
      await platform.stopWorkloads(ctx, org);
      return platform.deleteOrganization(ctx, org);
    },
    // The partner first: its customer count changes (lock order partner, customer, operation).
    async lock(trx, op: OperationRow) {
      await lockPartner(trx, op.partner_id);
      return { customer: await lockCustomerByUid(trx, op.customer_uid) };
    },
    async finish(trx, op, outcome, ctx, { customer }) {
      if (!customer) return { outcome };
      // Its quota goes back to the pool first: the quota row names the customer.
      await releaseCustomerQuota(trx, { uid: customer.uid, partnerId: customer.partner_id, mode: customer.mode });
      await removeCustomer(trx, customer, ctx.now);
      await countPartnerCustomers(trx, customer.partner_id, customer.mode, -1);
      const event = newEvent({
        partnerId: op.partner_id,
        mode: op.mode,
        type: 'customer.deleted',
        at: ctx.now,
        data: { customer_id: op.customer_id, immediate: customer.deletion_immediate ?? true },
      });
      return { outcome, event };
    },
    // The partner's customer count changed: no read made before the commit may stay cached.
    committed: (op) => partnerCache.invalidate(op.partner_id),
  });

  engine.addSweep(async ({ partner }) => {
    const uids = await graceEnded(db, deps.clock.now(), 100, partner);
    for (const uid of uids) await startScheduledTeardown(deps, uid);
    return uids.length;
  });

  engine.addSweep(async ({ partner }) => {
    // Quota changes reach the platform after their transaction; what did not (an outage, a crash) is applied here.
    if (partner) return 0;
    const pending = await pendingQuotas(db, deps.clock.now(), 20);
    for (const quota of pending) {
      // A customer that is not on the platform for good (still provisioning, failed, being torn down) is left alone.
      const customer = await findCustomerByUid(db, quota.customer_uid);
      if (!customer || !QUOTA_HOLDING.includes(customer.status)) continue;
      await applyQuota(deps, { partnerId: customer.partner_id, mode: customer.mode, organization: organizationRef(customer) }, quota);
    }
    return pending.length;
  });
}

/** The statuses whose quota the platform holds and a change of it must reach. */
const QUOTA_HOLDING: readonly CustomerRow['status'][] = ['active', 'suspended', 'deletion_scheduled'];

/** A grace period ended: the customer turns `deleting` and its teardown operation opens. */
async function startScheduledTeardown(deps: CustomerStepDeps, uid: string): Promise<void> {
  const customer = await findCustomerByUid(deps.db, uid);
  if (!customer) return;
  // The partner's test clock, read before the transaction (no other read may wait inside it).
  const partner = await deps.partnerCache.get(customer.partner_id);
  const now = new Date(modeNowMs(deps.clock, Number(partner?.test_clock_offset_ms ?? 0), customer.mode));
  await deps.db.transaction().execute(async (trx) => {
    const row = await lockCustomerByUid(trx, uid);
    if (row?.status !== 'deletion_scheduled' || !row.scheduled_deletion_at || row.scheduled_deletion_at > now) return;
    // The teardown starts when the grace period ended, on the partner's clock (a test clock walks through it in order).
    await startTeardown(trx, row, false, row.scheduled_deletion_at);
  });
}
