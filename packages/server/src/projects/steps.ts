import { newEvent } from '../events/payloads.ts';
import type { EventTables } from '../events/tables.ts';
import type { Db } from '../infra/db/handle.ts';
import type { OperationEngine } from '../operations/engine.ts';
import { type FinalOutcome, fail } from '../operations/handler.ts';
import type { OperationRow, OperationTables } from '../operations/tables.ts';
import type { Platform, PlatformContext, Progress, ProjectRef } from '../platform/platform.ts';
import type { ProjectCustomer, ProjectCustomers } from './customers.ts';
import { type Project, toProject } from './schemas.ts';
import {
  findProject,
  lockProject,
  type ProjectForPlatform,
  type ProjectRow,
  recordAddressRange,
  removeProject,
  setProjectState,
  settleProvisioningProject,
} from './store.ts';
import type { ProjectTables } from './tables.ts';

/** A project's steps also record the operation's outcome and event (and lock the customer, through `ProjectCustomers`). */
type ProjectStepsTables = ProjectTables & OperationTables & EventTables;
type ProjectStepsDb = Db<ProjectStepsTables>;

/** A project as the platform names it. */
export function projectRef(
  customer: Pick<ProjectCustomer, 'id' | 'organization'>,
  project: Pick<ProjectRow, 'name' | 'namespace'>,
): ProjectRef {
  return { customerId: customer.id, organization: customer.organization, project: project.name, namespace: project.namespace };
}

/** Records the address range the platform gave a project, unless the project has it already. */
export async function keepAddressRange(db: ProjectStepsDb, project: ProjectForPlatform, cidr: string): Promise<void> {
  if (project.cidr !== cidr) await recordAddressRange(db, project.uid, cidr);
}

/**
 * Moves a project on the platform one step: its address range (reserved once, recorded on the
 * project), then the project itself. No transaction is open: the platform may take its time.
 */
export async function advanceProject(
  db: ProjectStepsDb,
  platform: Platform,
  ctx: PlatformContext,
  customer: Pick<ProjectCustomer, 'id' | 'organization'>,
  project: ProjectForPlatform,
): Promise<Progress> {
  const ref = projectRef(customer, project);
  let cidr = project.cidr;
  if (!cidr) {
    const range = await platform.reserveAddressRange(ctx, ref);
    if (range.state !== 'done') return range;
    cidr = range.cidr;
    await keepAddressRange(db, project, cidr);
  }
  return platform.ensureProject(ctx, { ...ref, cidr });
}

/**
 * The customer's first project, settled with the customer's creation (in the operation's commit) when
 * the settling statement did not (the customer was no longer provisioning, or the project was not):
 * its view for the event, or null.
 */
export async function settleFirstProject(
  trx: ProjectStepsDb,
  customerUid: string,
  name: string,
  ok: boolean,
  now: Date,
  cidr: string | null = null,
): Promise<Project | null> {
  const settled = await settleProvisioningProject(trx, customerUid, name, ok ? 'ready' : 'failed', now, cidr);
  if (settled) return toProject(settled);
  const project = await lockProject(trx, customerUid, name);
  return project ? toProject(project) : null;
}

/** A provisioning project turns ready or failed with its operation (in the operation's commit); its view for the event. */
export async function settleProject(trx: ProjectStepsDb, project: ProjectRow | undefined, ok: boolean, now: Date): Promise<Project | null> {
  if (!project) return null;
  if (project.state !== 'provisioning') return toProject(project);
  return toProject(await setProjectState(trx, project, ok ? 'ready' : 'failed', now));
}

interface Locked {
  customer: ProjectCustomer | undefined;
  project: ProjectRow | undefined;
}

/** `project.create` and `project.delete`, registered with the operation engine. */
export function registerProjectSteps(
  engine: OperationEngine<ProjectStepsTables>,
  deps: { db: ProjectStepsDb; platform: Platform; customers: ProjectCustomers },
): void {
  const { db, platform, customers } = deps;
  const lock = async (trx: ProjectStepsDb, op: OperationRow): Promise<Locked> => {
    const customer = await customers.lockByUid(trx, op.customer_uid);
    return { customer, project: await lockProject(trx, op.customer_uid, op.project ?? '') };
  };

  engine.register<Locked>('project.create', {
    async advance(op, ctx) {
      const customer = await customers.byUid(op.customer_uid);
      if (!customer) return fail('CUSTOMER_DELETED');
      if (customer.status === 'deleting') return fail('CUSTOMER_DELETING');
      const project = await findProject(db, customer.uid, op.project ?? '');
      if (!project) return fail('PROVISIONING_FAILED', `Project ${op.project} no longer exists.`);
      return advanceProject(db, platform, ctx, customer, project);
    },
    lock,
    async finish(trx, op, outcome, ctx, { customer, project }) {
      let final: FinalOutcome = outcome;
      if (final.state === 'done' && !customer) final = fail('CUSTOMER_DELETED');
      if (final.state === 'done' && customer?.status === 'deleting') final = fail('CUSTOMER_DELETING');
      const view = await settleProject(trx, project, final.state === 'done', ctx.now);
      // A project cap reaches a project only once it exists on the platform: the quota is applied again.
      if (final.state === 'done' && customer && project) await customers.reapplyQuota(trx, customer.uid, project.name);
      const event = newEvent({
        partnerId: op.partner_id,
        mode: op.mode,
        type: final.state === 'done' ? 'project.ready' : 'project.failed',
        at: ctx.now,
        data: {
          customer_id: op.customer_id,
          operation_id: op.id,
          project: view,
          state: view?.state ?? 'failed',
          error: final.state === 'failed' ? { code: final.code, message: final.message } : null,
        },
      });
      return { outcome: final, event };
    },
  });

  engine.register<Locked>('project.delete', {
    async advance(op, ctx) {
      const customer = await customers.byUid(op.customer_uid);
      const project = customer ? await findProject(db, customer.uid, op.project ?? '') : undefined;
      // Gone with its customer, whose teardown removed it.
      if (!customer || !project) return { state: 'done' };
      return platform.deleteProject(ctx, projectRef(customer, project));
    },
    lock,
    async finish(trx, op, outcome, ctx, { project }) {
      // Went with its customer, whose customer.deleted reports it.
      if (!project) return { outcome };
      await removeProject(trx, project.uid);
      const event = newEvent({
        partnerId: op.partner_id,
        mode: op.mode,
        type: 'project.deleted',
        at: ctx.now,
        data: { customer_id: op.customer_id, project: project.name },
      });
      return { outcome, event };
    },
  });
}
