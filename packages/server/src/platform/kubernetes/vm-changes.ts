import type { HeldResources, OrganizationRef, PlatformContext, VmChange, VmRef, VmResources } from '../platform.ts';
import { ANNOTATIONS, type Driver, isDeleting } from './driver.ts';
import { KINDS, type KubeObject, kubeMessage, kubeStatus } from './kube.ts';
import { orUnavailable } from './progress.ts';
import { gibibytes } from './resources.ts';

/** The organization's project namespaces, as Kube-DC names them (`status.namespace`, else `<organization>-<project>`). */
async function projectNamespaces(d: Driver, organization: string): Promise<string[]> {
  return (await d.kube.list(KINDS.project, organization)).map((project) =>
    String(project.status?.namespace ?? `${organization}-${project.metadata.name}`),
  );
}

/** The customer's VM, or undefined when its namespace is none of the customer's projects', or it is gone or going. */
async function customerVm(d: Driver, vm: VmRef): Promise<KubeObject | undefined> {
  if (!(await projectNamespaces(d, vm.organization)).includes(vm.namespace)) return undefined;
  const found = await d.kube.get(KINDS.vm, vm.name, vm.namespace);
  return found && !isDeleting(found) ? found : undefined;
}

const notFound = (vm: VmRef): VmChange => ({
  state: 'refused',
  code: 'NOT_FOUND',
  message: `There is no VM ${vm.name} in ${vm.namespace}.`,
});

function refusal(error: unknown): VmChange | undefined {
  const status = kubeStatus(error);
  if (status === 400 || status === 403 || status === 422)
    return { state: 'refused', code: `UPSTREAM_${status}`, message: `The cluster refused: ${kubeMessage(error)}`.slice(0, 500) };
  return undefined;
}

/**
 * Stops or starts a VM as KubeVirt's own `virtctl stop|start` leaves it: `spec.runStrategy` Halted or
 * Always, with the older `spec.running` removed (KubeVirt refuses both at once). A stop by the customer
 * also drops a suspension's mark, so a later resume leaves the VM stopped.
 */
export function setVmRunning(d: Driver, _ctx: PlatformContext, vm: VmRef, running: boolean): Promise<VmChange> {
  return orUnavailable(running ? 'start a VM' : 'stop a VM', async (): Promise<VmChange> => {
    const current = await customerVm(d, vm);
    if (!current) return notFound(vm);
    const strategy = running ? 'Always' : 'Halted';
    const marked = current.metadata.annotations?.[ANNOTATIONS.stoppedBySuspend] !== undefined;
    if (current.spec?.runStrategy === strategy && current.spec?.running === undefined && !marked) return { state: 'done' };
    try {
      await d.kube.mergePatch(KINDS.vm, vm.name, vm.namespace, {
        ...(marked ? { metadata: { annotations: { [ANNOTATIONS.stoppedBySuspend]: null } } } : {}),
        spec: { runStrategy: strategy, running: null },
      });
    } catch (error) {
      if (kubeStatus(error) === 404) return notFound(vm);
      const refused = refusal(error);
      if (refused) return refused;
      throw error;
    }
    return { state: 'done' };
  });
}

/** Deletes the VM; its root disk (a DataVolume it owns) goes with it through the cluster's garbage collector. */
export function deleteVm(d: Driver, _ctx: PlatformContext, vm: VmRef): Promise<VmChange> {
  return orUnavailable('delete a VM', async (): Promise<VmChange> => {
    if (!(await customerVm(d, vm))) return { state: 'done' };
    try {
      await d.kube.delete(KINDS.vm, vm.name, vm.namespace);
    } catch (error) {
      const refused = refusal(error);
      if (refused) return refused;
      throw error;
    }
    return { state: 'done' };
  });
}

export function heldResources(d: Driver, _ctx: PlatformContext, org: OrganizationRef): Promise<HeldResources> {
  return orUnavailable('quota use', () => heldByOrganization(d, org.organization));
}

/**
 * What the organization's VMs hold against its quota, as a namespace's ResourceQuota counts them: each
 * VM's cores and guest memory (a stopped VM too: its place is kept) and each DataVolume's size; in all
 * and per project namespace.
 */
export async function heldByOrganization(d: Driver, organization: string): Promise<HeldResources> {
  const customer: VmResources = { vcpu: 0, memory_gib: 0, storage_gib: 0 };
  const namespaces: Record<string, VmResources> = {};
  for (const namespace of await projectNamespaces(d, organization)) {
    const here: VmResources = { vcpu: 0, memory_gib: 0, storage_gib: 0 };
    for (const existing of await d.kube.list(KINDS.vm, namespace)) {
      if (isDeleting(existing)) continue;
      const size = sizeOf(existing);
      here.vcpu += size.vcpu;
      here.memory_gib += size.memory_gib;
    }
    for (const disk of await d.kube.list(KINDS.dataVolume, namespace)) if (!isDeleting(disk)) here.storage_gib += diskGib(disk);
    namespaces[namespace] = here;
    customer.vcpu += here.vcpu;
    customer.memory_gib += here.memory_gib;
    customer.storage_gib += here.storage_gib;
  }
  return { customer, namespaces };
}

/** What a VM holds of CPU and memory: its cores and guest memory (a VM without them counts 1 vCPU, 1 GiB). */
function sizeOf(vm: KubeObject): Pick<VmResources, 'vcpu' | 'memory_gib'> {
  const spec = (vm.spec ?? {}) as { template?: { spec?: { domain?: { cpu?: { cores?: number }; memory?: { guest?: string } } } } };
  const domain = spec.template?.spec?.domain ?? {};
  return { vcpu: domain.cpu?.cores ?? 1, memory_gib: gibibytes(domain.memory?.guest ?? '1Gi') };
}

/** A DataVolume's size, as `pvc` or `storage` asks it. */
function diskGib(disk: KubeObject): number {
  const spec = (disk.spec ?? {}) as {
    pvc?: { resources?: { requests?: { storage?: string } } };
    storage?: { resources?: { requests?: { storage?: string } } };
  };
  return gibibytes(spec.pvc?.resources?.requests?.storage ?? spec.storage?.resources?.requests?.storage ?? '0');
}
