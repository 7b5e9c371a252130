import { type Kysely, sql } from 'kysely';
import type { HeldResources, PlatformContext, PlatformVm, VmChange, VmCreation, VmRef, VmResources, Workloads } from '../platform.ts';
import type { SandboxScope, SandboxTables } from './tables.ts';

type Db = Kysely<SandboxTables>;

/** What one simulated VM and one simulated database hold while they run, unless created with a size. */
export const VM_SIZE = { vcpu: 2, memory_gib: 4, storage_gib: 20 } as const;
export const DATABASE_SIZE = { vcpu: 1, memory_gib: 2, storage_gib: 10 } as const;

/**
 * The sandbox's VMs made from the console's form: their size and image live in `sandbox_vms`, their name
 * joins the customer's workloads (`sandbox_workloads.vms`), so they block deletion, count in
 * `workloads_running`, stop and start with the customer, and accrue usage at their own size.
 */
export async function createSandboxVm(
  db: Db,
  ctx: PlatformContext,
  scope: SandboxScope,
  vm: PlatformVm,
  workloadsOf: (trx: Db) => Promise<Workloads>,
  accrue: (trx: Db, workloads: Workloads) => Promise<void>,
): Promise<VmCreation> {
  // The sandbox's own short transaction (never a caller's): one creator per organization at a time, so
  // two VMs cannot both fit the quota's last room.
  return db.transaction().execute(async (trx): Promise<VmCreation> => {
    const name = `${vm.namespace}/${vm.name}`;
    await sql`select pg_advisory_xact_lock(hashtext(${`sandbox-vms:${scope}:${vm.organization}`}))`.execute(trx);
    const before = await workloadsOf(trx);
    const size = { vcpu: vm.vcpu, memory_gib: vm.memoryGib, storage_gib: vm.storageGib };
    if (before.vms.includes(name)) {
      // Asking again for the same VM is done; another VM of that name is a conflict, as on a cluster.
      const existing = await trx
        .selectFrom('sandbox_vms')
        .select(['vcpu', 'memory_gib', 'storage_gib', 'image'])
        .where('platform_scope', '=', scope)
        .where('organization', '=', vm.organization)
        .where('name', '=', name)
        .executeTakeFirst();
      const same =
        existing !== undefined &&
        existing.vcpu === size.vcpu &&
        existing.memory_gib === size.memory_gib &&
        existing.storage_gib === size.storage_gib &&
        canonical(existing.image) === canonical(vm.image);
      return same
        ? { state: 'done' }
        : { state: 'refused', code: 'ALREADY_EXISTS', message: `A VM named ${vm.name} exists in ${vm.namespace}.` };
    }
    const over = await overQuota(trx, scope, vm, before, size);
    if (over) return { state: 'refused', code: 'QUOTA_EXCEEDED', message: over };
    await trx
      .insertInto('sandbox_vms')
      .values({
        platform_scope: scope,
        organization: vm.organization,
        name,
        namespace: vm.namespace,
        ...size,
        image: JSON.stringify(vm.image),
        created_at: ctx.now,
      })
      .onConflict((oc) =>
        oc
          .columns(['platform_scope', 'organization', 'name'])
          .doUpdateSet({ ...size, image: JSON.stringify(vm.image), created_at: ctx.now }),
      )
      .execute();
    await trx
      .insertInto('sandbox_workloads')
      .values({ platform_scope: scope, organization: vm.organization, vms: [name], databases: [], gpus: '{}', running: true })
      .onConflict((oc) =>
        oc.columns(['platform_scope', 'organization']).doUpdateSet({
          vms: sql`case when ${name} = any(sandbox_workloads.vms) then sandbox_workloads.vms else array_append(sandbox_workloads.vms, ${name}) end`,
        }),
      )
      .execute();
    await accrue(trx, await workloadsOf(trx));
    return { state: 'done' };
  });
}

/** Each VM's size (VM_SIZE when it was not made with one). */
async function vmSizes(db: Db, scope: SandboxScope, organization: string, vms: string[]): Promise<Map<string, VmResources>> {
  const sizes = new Map<string, VmResources>();
  if (vms.length === 0) return sizes;
  const rows = await db
    .selectFrom('sandbox_vms')
    .select(['name', 'vcpu', 'memory_gib', 'storage_gib'])
    .where('platform_scope', '=', scope)
    .where('organization', '=', organization)
    .where('name', 'in', vms)
    .execute();
  for (const row of rows) sizes.set(row.name, { vcpu: row.vcpu, memory_gib: row.memory_gib, storage_gib: row.storage_gib });
  for (const name of vms) if (!sizes.has(name)) sizes.set(name, VM_SIZE);
  return sizes;
}

const add = (into: VmResources, size: VmResources) => {
  into.vcpu += size.vcpu;
  into.memory_gib += size.memory_gib;
  into.storage_gib += size.storage_gib;
};

/** What the workloads hold against the quota: every VM, a stopped one too, and every database; in all and per namespace. */
export async function heldResourcesOf(db: Db, scope: SandboxScope, organization: string, workloads: Workloads): Promise<HeldResources> {
  const sizes = await vmSizes(db, scope, organization, workloads.vms);
  const customer = {
    vcpu: workloads.databases.length * DATABASE_SIZE.vcpu,
    memory_gib: workloads.databases.length * DATABASE_SIZE.memory_gib,
    storage_gib: workloads.databases.length * DATABASE_SIZE.storage_gib,
  };
  const namespaces: Record<string, VmResources> = {};
  for (const name of workloads.vms) {
    const size = sizes.get(name) ?? VM_SIZE;
    add(customer, size);
    const slash = name.indexOf('/');
    if (slash < 0) continue;
    const namespace = name.slice(0, slash);
    namespaces[namespace] = namespaces[namespace] ?? { vcpu: 0, memory_gib: 0, storage_gib: 0 };
    add(namespaces[namespace], size);
  }
  return { customer, namespaces };
}

/** What accrues usage while the workloads run: each running VM at its size, a stopped one its disk only, and the databases. */
export async function usageHeld(db: Db, scope: SandboxScope, organization: string, workloads: Workloads): Promise<VmResources> {
  const sizes = await vmSizes(db, scope, organization, workloads.vms);
  const halted = new Set(workloads.halted ?? []);
  const held = {
    vcpu: workloads.databases.length * DATABASE_SIZE.vcpu,
    memory_gib: workloads.databases.length * DATABASE_SIZE.memory_gib,
    storage_gib: workloads.databases.length * DATABASE_SIZE.storage_gib,
  };
  for (const name of workloads.vms) {
    const size = sizes.get(name) ?? VM_SIZE;
    add(held, halted.has(name) ? { vcpu: 0, memory_gib: 0, storage_gib: size.storage_gib } : size);
  }
  return held;
}

/** Why the VM does not fit the customer's quota or its project's cap, or undefined when it does. */
async function overQuota(
  db: Db,
  scope: SandboxScope,
  vm: PlatformVm,
  workloads: Workloads,
  size: VmResources,
): Promise<string | undefined> {
  const held = await heldResourcesOf(db, scope, vm.organization, workloads);
  const customer = held.customer;
  const project = held.namespaces[vm.namespace] ?? { vcpu: 0, memory_gib: 0, storage_gib: 0 };
  const units = { vcpu: 'vCPU', memory_gib: 'GiB of memory', storage_gib: 'GiB of storage' } as const;
  for (const key of ['vcpu', 'memory_gib', 'storage_gib'] as const) {
    const free = vm.quota.customer[key] - customer[key];
    if (size[key] > free)
      return `The VM needs ${size[key]} ${units[key]}; the customer's quota has ${Math.max(0, free)} of ${vm.quota.customer[key]} free.`;
    const cap = vm.quota.project[key];
    if (cap !== undefined && size[key] > cap - project[key]) {
      return `The VM needs ${size[key]} ${units[key]}; the project's cap has ${Math.max(0, cap - project[key])} of ${cap} free.`;
    }
  }
  return undefined;
}

/**
 * Stops, starts or deletes one VM, under the same per-organization lock as a creation: a stopped VM is
 * kept in `sandbox_workloads.halted` (it holds its quota and its disk, and runs no more; a resume leaves it
 * stopped), a deleted one leaves the workloads and `sandbox_vms`. Usage follows at once.
 */
export async function changeSandboxVm(
  db: Db,
  scope: SandboxScope,
  vm: VmRef,
  change: 'stop' | 'start' | 'delete',
  workloadsOf: (trx: Db) => Promise<Workloads>,
  accrue: (trx: Db, workloads: Workloads) => Promise<void>,
): Promise<VmChange> {
  return db.transaction().execute(async (trx): Promise<VmChange> => {
    const name = `${vm.namespace}/${vm.name}`;
    await sql`select pg_advisory_xact_lock(hashtext(${`sandbox-vms:${scope}:${vm.organization}`}))`.execute(trx);
    const before = await workloadsOf(trx);
    if (!before.vms.includes(name)) {
      if (change === 'delete') return { state: 'done' };
      return { state: 'refused', code: 'NOT_FOUND', message: `There is no VM ${vm.name} in ${vm.namespace}.` };
    }
    const halted = new Set(before.halted ?? []);
    if ((change === 'stop' && halted.has(name)) || (change === 'start' && !halted.has(name))) return { state: 'done' };
    if (change === 'stop') halted.add(name);
    else halted.delete(name);
    await trx
      .updateTable('sandbox_workloads')
      .set({ halted: [...halted], ...(change === 'delete' ? { vms: before.vms.filter((n) => n !== name) } : {}) })
      .where('platform_scope', '=', scope)
      .where('organization', '=', vm.organization)
      .execute();
    if (change === 'delete')
      await trx
        .deleteFrom('sandbox_vms')
        .where('platform_scope', '=', scope)
        .where('organization', '=', vm.organization)
        .where('name', '=', name)
        .execute();
    await accrue(trx, await workloadsOf(trx));
    return { state: 'done' };
  });
}

/** JSON with keys sorted: jsonb gives objects back in its own key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}
