import type { OrganizationRef, PlatformContext, Workloads } from '../platform.ts';
import { ANNOTATIONS, type Driver, isDeleting } from './driver.ts';
import { KINDS, type KubeObject } from './kube.ts';
import { orUnavailable } from './progress.ts';

interface Found {
  vms: KubeObject[];
  databases: KubeObject[];
}

/** The customer's VMs and managed databases, in every backing namespace of its Projects. */
async function find(d: Driver, org: OrganizationRef): Promise<Found> {
  const found: Found = { vms: [], databases: [] };
  for (const project of await d.kube.list(KINDS.project, org.organization)) {
    const namespace = String(project.status?.namespace ?? `${org.organization}-${project.metadata.name}`);
    if (!(await d.kube.get(KINDS.namespace, namespace))) continue;
    found.vms.push(...(await d.kube.list(KINDS.vm, namespace)).filter((vm) => !isDeleting(vm)));
    found.databases.push(...(await d.kube.list(KINDS.database, namespace)).filter((db) => !isDeleting(db)));
  }
  return found;
}

/** A VM runs unless its run strategy (or the older `running: false`) says halted: the cluster acts on that. */
function vmRuns(vm: KubeObject): boolean {
  const spec = vm.spec ?? {};
  return typeof spec.runStrategy === 'string' ? spec.runStrategy !== 'Halted' : spec.running !== false;
}

function engineOf(db: KubeObject): string {
  return String(db.spec?.engine ?? 'postgresql');
}

/** A postgresql database is stopped by hibernating its CloudNativePG Cluster; a mariadb one cannot be stopped. */
async function databaseRuns(d: Driver, db: KubeObject): Promise<boolean> {
  if (engineOf(db) !== 'postgresql') return true;
  const cluster = await d.kube.get(KINDS.cnpgCluster, db.metadata.name ?? '', db.metadata.namespace);
  return cluster?.metadata.annotations?.[ANNOTATIONS.hibernation] !== 'on';
}

const qualified = (object: KubeObject) => `${object.metadata.namespace}/${object.metadata.name}`;

async function describe(d: Driver, found: Found): Promise<Workloads> {
  const gpus: Record<string, number> = {};
  const profileOf = Object.fromEntries(Object.entries(d.config.gpuProfiles).map(([profile, device]) => [device, profile]));
  const halted: string[] = [];
  for (const vm of found.vms) {
    if (!vmRuns(vm)) {
      halted.push(qualified(vm));
      continue;
    }
    const template = (vm.spec?.template ?? {}) as { spec?: { domain?: { devices?: { gpus?: Array<{ deviceName?: string }> } } } };
    for (const gpu of template.spec?.domain?.devices?.gpus ?? []) {
      const profile = profileOf[gpu.deviceName ?? ''] ?? gpu.deviceName ?? 'unknown';
      gpus[profile] = (gpus[profile] ?? 0) + 1;
    }
  }
  for (const db of found.databases) if (!(await databaseRuns(d, db))) halted.push(qualified(db));
  const all = found.vms.length + found.databases.length;
  return {
    vms: found.vms.map(qualified),
    databases: found.databases.map(qualified),
    gpus,
    running: halted.length < all,
    halted,
  };
}

export function listWorkloads(d: Driver, _ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
  return orUnavailable('workloads', async () => describe(d, await find(d, org)));
}

/**
 * Stops what runs, marking each with what to restore: a VM's run strategy becomes Halted with the old one
 * in `tenantry.io/stopped-by-suspend` (one patch, so a crash leaves no unmarked stop); a postgresql
 * database is marked first and then its CNPG Cluster hibernated. What was already stopped is not marked,
 * so resume leaves it stopped.
 */
export function stopWorkloads(d: Driver, _ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
  return orUnavailable('stop workloads', async () => {
    const found = await find(d, org);
    for (const vm of found.vms) {
      if (!vmRuns(vm)) continue;
      const before = typeof vm.spec?.runStrategy === 'string' ? vm.spec.runStrategy : 'Always';
      await d.kube.mergePatch(KINDS.vm, vm.metadata.name ?? '', vm.metadata.namespace, {
        metadata: { annotations: { [ANNOTATIONS.stoppedBySuspend]: before } },
        spec: { runStrategy: 'Halted', running: null },
      });
    }
    for (const db of found.databases) {
      if (engineOf(db) !== 'postgresql' || !(await databaseRuns(d, db))) continue;
      if (db.metadata.annotations?.[ANNOTATIONS.stoppedBySuspend] === undefined)
        await d.kube.mergePatch(KINDS.database, db.metadata.name ?? '', db.metadata.namespace, {
          metadata: { annotations: { [ANNOTATIONS.stoppedBySuspend]: 'hibernated' } },
        });
      await d.kube.mergePatch(KINDS.cnpgCluster, db.metadata.name ?? '', db.metadata.namespace, {
        metadata: { annotations: { [ANNOTATIONS.hibernation]: 'on' } },
      });
    }
    return describe(d, await find(d, org));
  });
}

/** Starts what suspend stopped (and only that), then removes the marks. */
export function startWorkloads(d: Driver, _ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
  return orUnavailable('start workloads', async () => {
    const found = await find(d, org);
    for (const vm of found.vms) {
      const before = vm.metadata.annotations?.[ANNOTATIONS.stoppedBySuspend];
      if (before === undefined) continue;
      await d.kube.mergePatch(KINDS.vm, vm.metadata.name ?? '', vm.metadata.namespace, {
        metadata: { annotations: { [ANNOTATIONS.stoppedBySuspend]: null } },
        spec: { runStrategy: before === 'Halted' ? 'Always' : before },
      });
    }
    for (const db of found.databases) {
      if (db.metadata.annotations?.[ANNOTATIONS.stoppedBySuspend] === undefined) continue;
      const cluster = await d.kube.get(KINDS.cnpgCluster, db.metadata.name ?? '', db.metadata.namespace);
      if (cluster?.metadata.annotations?.[ANNOTATIONS.hibernation] !== undefined)
        await d.kube.mergePatch(KINDS.cnpgCluster, db.metadata.name ?? '', db.metadata.namespace, {
          metadata: { annotations: { [ANNOTATIONS.hibernation]: null } },
        });
      await d.kube.mergePatch(KINDS.database, db.metadata.name ?? '', db.metadata.namespace, {
        metadata: { annotations: { [ANNOTATIONS.stoppedBySuspend]: null } },
      });
    }
    return describe(d, await find(d, org));
  });
}

/** GPUs the running VMs hold, by profile; undefined when the cluster cannot be read now. */
export async function gpuUsage(d: Driver, ctx: PlatformContext, org: OrganizationRef): Promise<Record<string, number> | undefined> {
  try {
    return (await listWorkloads(d, ctx, org)).gpus;
  } catch (error) {
    if ((error as Error).name === 'PlatformUnavailableError') return undefined;
    throw error;
  }
}
