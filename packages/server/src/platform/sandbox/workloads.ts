import { type Kysely, sql } from 'kysely';
import type { HeldResources, OrganizationRef, PlatformContext, PlatformVm, VmChange, VmCreation, VmRef, Workloads } from '../platform.ts';
import { changeSandboxVm, createSandboxVm, heldResourcesOf, usageHeld } from './sandbox-vms.ts';
import { latency, type Sandbox, scopeOf, takeFailure } from './state.ts';
import type { SandboxTables, SandboxWorkloadsTable } from './tables.ts';

export async function listWorkloads(s: Sandbox, ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
  await latency(s, ctx);
  return readWorkloads(s.db, ctx, org.organization);
}

export async function stopWorkloads(s: Sandbox, ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
  await latency(s, ctx);
  return setRunning(s, ctx, org.organization, false);
}

export async function startWorkloads(s: Sandbox, ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
  await latency(s, ctx);
  return setRunning(s, ctx, org.organization, true);
}

/** Sandbox only (test helper): replaces the customer's live workloads. */
export async function setWorkloads(s: Sandbox, ctx: PlatformContext, org: OrganizationRef, workloads: Workloads): Promise<Workloads> {
  const values = {
    vms: workloads.vms,
    databases: workloads.databases,
    gpus: JSON.stringify(workloads.gpus),
    running: workloads.running,
    halted: workloads.halted ?? [],
  };
  await s.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('sandbox_workloads')
      .values({ platform_scope: scopeOf(ctx), organization: org.organization, ...values })
      .onConflict((oc) => oc.columns(['platform_scope', 'organization']).doUpdateSet(values))
      .execute();
    await accrue(trx, ctx, org.organization, workloads);
  });
  return workloads;
}

export async function createVm(s: Sandbox, ctx: PlatformContext, vm: PlatformVm): Promise<VmCreation> {
  await latency(s, ctx);
  return createSandboxVm(
    s.db,
    ctx,
    scopeOf(ctx),
    vm,
    (trx) => readWorkloads(trx, ctx, vm.organization),
    (trx, workloads) => accrue(trx, ctx, vm.organization, workloads),
  );
}

/** Stops, starts or deletes one of the organization's VMs (the console's buttons). */
export async function changeVm(s: Sandbox, ctx: PlatformContext, vm: VmRef, change: 'stop' | 'start' | 'delete'): Promise<VmChange> {
  await latency(s, ctx);
  return changeSandboxVm(
    s.db,
    scopeOf(ctx),
    vm,
    change,
    (trx) => readWorkloads(trx, ctx, vm.organization),
    (trx, workloads) => accrue(trx, ctx, vm.organization, workloads),
  );
}

export async function heldResources(s: Sandbox, ctx: PlatformContext, org: OrganizationRef): Promise<HeldResources> {
  await latency(s, ctx);
  return heldResourcesOf(s.db, scopeOf(ctx), org.organization, await readWorkloads(s.db, ctx, org.organization));
}

export async function gpuUsage(s: Sandbox, ctx: PlatformContext, org: OrganizationRef): Promise<Record<string, number> | undefined> {
  await latency(s, ctx);
  // Test mode can make the check fail (CONTRACT §5, failures of type gpu_usage).
  if (ctx.mode === 'test' && (await takeFailure(s, ctx, 'gpu_usage'))) return undefined;
  const workloads = await readWorkloads(s.db, ctx, org.organization);
  return workloads.running ? workloads.gpus : {};
}

async function setRunning(s: Sandbox, ctx: PlatformContext, organization: string, running: boolean): Promise<Workloads> {
  // The common case in one statement: a stop, or a start of an organization that runs
  // nothing, whose open usage span ends and none begins. The update's own condition is checked on
  // the row as it is when the update locks it. A start of something (a new span) takes the transaction.
  const scope = scopeOf(ctx);
  const { rows } = await sql<{ done: boolean } & (WorkloadsRow | { [K in keyof WorkloadsRow]: null })>`
    with changed as (
      update sandbox_workloads set running = ${running}
      where platform_scope = ${scope} and organization = ${organization}
        and (not ${running}::boolean or (cardinality(vms) = 0 and cardinality(databases) = 0 and gpus = '{}'::jsonb))
      returning vms, databases, gpus, running, halted),
    quiet as (
      select exists (select 1 from changed)
        or not exists (select 1 from sandbox_workloads where platform_scope = ${scope} and organization = ${organization}) as yes),
    ended as (
      update sandbox_usage set ended_at = ${ctx.now}::timestamptz
      where platform_scope = ${scope} and organization = ${organization} and ended_at is null and (select yes from quiet))
    select (select yes from quiet) as done, changed.* from (select 1) as one left join changed on true`.execute(s.db);
  const row = rows[0];
  if (row?.done) return toWorkloads(row.running === null ? undefined : row);
  return s.db.transaction().execute(async (trx) => {
    await trx
      .updateTable('sandbox_workloads')
      .set({ running })
      .where('platform_scope', '=', scopeOf(ctx))
      .where('organization', '=', organization)
      .execute();
    const workloads = await readWorkloads(trx, ctx, organization);
    await accrue(trx, ctx, organization, workloads);
    return workloads;
  });
}

/** The organization's workloads (none recorded: nothing, and running). */
async function readWorkloads(db: Kysely<SandboxTables>, ctx: PlatformContext, organization: string): Promise<Workloads> {
  const row = await db
    .selectFrom('sandbox_workloads')
    .select(['vms', 'databases', 'gpus', 'running', 'halted'])
    .where('platform_scope', '=', scopeOf(ctx))
    .where('organization', '=', organization)
    .executeTakeFirst();
  return toWorkloads(row);
}

type WorkloadsRow = Pick<SandboxWorkloadsTable, 'vms' | 'databases' | 'gpus' | 'running'> & { halted: string[] };

/** An organization's workloads from its row (none recorded: nothing, and running). */
function toWorkloads(row: WorkloadsRow | undefined): Workloads {
  if (!row) return { vms: [], databases: [], gpus: {}, running: true };
  const halted = row.halted.filter((name) => row.vms.includes(name));
  return {
    vms: row.vms,
    databases: row.databases,
    gpus: row.gpus as Record<string, number>,
    running: row.running,
    ...(halted.length > 0 ? { halted } : {}),
  };
}

/**
 * Usage accrues while workloads run: the open span of the organization ends now, and a new one starts
 * with what now runs (VM_SIZE per VM, DATABASE_SIZE per database, GPUs as granted to workloads).
 */
export async function accrue(db: Kysely<SandboxTables>, ctx: PlatformContext, organization: string, workloads: Workloads): Promise<void> {
  const scope = scopeOf(ctx);
  await db
    .updateTable('sandbox_usage')
    .set({ ended_at: ctx.now })
    .where('platform_scope', '=', scope)
    .where('organization', '=', organization)
    .where('ended_at', 'is', null)
    .execute();
  if (!workloads.running) return;
  const { gpus } = workloads;
  // Each VM at its own size (VM_SIZE when it was not made with one; a stopped one its disk), DATABASE_SIZE per database.
  const held = await usageHeld(db, scope, organization, workloads);
  if (held.vcpu === 0 && held.storage_gib === 0 && Object.values(gpus).every((n) => n === 0)) return;
  await db
    .insertInto('sandbox_usage')
    .values({ platform_scope: scope, organization, started_at: ctx.now, ended_at: null, ...held, gpus: JSON.stringify(gpus) })
    .execute();
}
