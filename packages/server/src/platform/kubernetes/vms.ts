import { createHash } from 'node:crypto';
import type { PlatformContext, PlatformVm, VmCreation, VmResources } from '../platform.ts';
import { type Driver, isDeleting, ownedBy, ownerLabels } from './driver.ts';
import { KINDS, type KubeObject, kubeMessage, kubeStatus } from './kube.ts';
import { orUnavailable } from './progress.ts';

/** On a VM Tenantry made: a digest of what was asked (a repeat of the same request is done, another is a conflict). */
const REQUEST = 'tenantry.io/vm-request';
const OS_NAME = 'tenantry.io/os-name';
/** KubeVirt's limit on inline NoCloud user data. */
export const CLOUD_INIT_MAX_BYTES = 2048;

/**
 * A VM from the console's form: a KubeVirt VirtualMachine whose root disk is a DataVolume imported from
 * the image's URL, sized as asked, booting with the image's firmware, machine type and features, and
 * its cloud-init as a NoCloud disk. The customer's quota and the project's cap are checked against the
 * VMs already there. The cluster's own quotas (ResourceQuota, HNC) admit pods and volumes, not the
 * VirtualMachine: what slips past this check (two creates at once) is stopped there, at the VM's start.
 */
export function createVm(d: Driver, ctx: PlatformContext, vm: PlatformVm): Promise<VmCreation> {
  return orUnavailable('create a VM', async (): Promise<VmCreation> => {
    // KubeVirt's admission refuses inline cloud-init over 2,048 bytes (a Secret would hold more, and the
    // driver holds no permission on Secrets): say so instead of letting the cluster answer a bare 422.
    const cloudInitBytes = Buffer.byteLength(vm.image.cloudInit ?? '');
    if (cloudInitBytes > CLOUD_INIT_MAX_BYTES)
      return {
        state: 'refused',
        code: 'UPSTREAM_422',
        message: `The cloud-init of ${vm.image.osName} is ${cloudInitBytes} bytes; KubeVirt takes at most ${CLOUD_INIT_MAX_BYTES} inline.`,
      };
    const request = requestDigest(vm);
    const existing = await d.kube.get(KINDS.vm, vm.name, vm.namespace);
    if (existing) return sameRequest(existing, ctx, vm, request);
    const over = await overQuota(d, vm);
    if (over) return { state: 'refused', code: 'QUOTA_EXCEEDED', message: over };
    try {
      const { object, created } = await d.kube.createOrGet(manifest(ctx, vm, request));
      return created ? { state: 'done' } : sameRequest(object, ctx, vm, request);
    } catch (error) {
      const status = kubeStatus(error);
      // Admission of a ResourceQuota or an HRQ: "exceeded quota".
      if (status === 403 && /quota/i.test(kubeMessage(error))) {
        return { state: 'refused', code: 'QUOTA_EXCEEDED', message: `The cluster refused the VM: ${kubeMessage(error)}`.slice(0, 500) };
      }
      if (status === 400 || status === 403 || status === 404 || status === 422) {
        return { state: 'refused', code: `UPSTREAM_${status}`, message: `The cluster refused the VM: ${kubeMessage(error)}`.slice(0, 500) };
      }
      throw error;
    }
  });
}

function sameRequest(existing: KubeObject, ctx: PlatformContext, vm: PlatformVm, request: string): VmCreation {
  if (!isDeleting(existing) && ownedBy(existing, ctx, vm.customerId) && existing.metadata.annotations?.[REQUEST] === request)
    return { state: 'done' };
  return { state: 'refused', code: 'ALREADY_EXISTS', message: `A VM named ${vm.name} exists in ${vm.namespace}.` };
}

function requestDigest(vm: PlatformVm): string {
  const asked = { vcpu: vm.vcpu, memoryGib: vm.memoryGib, storageGib: vm.storageGib, image: vm.image };
  return createHash('sha256').update(JSON.stringify(asked)).digest('hex').slice(0, 32);
}

function manifest(ctx: PlatformContext, vm: PlatformVm, request: string): KubeObject {
  const { image } = vm;
  const features: Record<string, unknown> = {};
  if (image.features.includes('acpi')) features.acpi = {};
  if (image.features.includes('apic')) features.apic = {};
  if (image.features.includes('smm')) features.smm = { enabled: true };
  if (image.features.includes('hyperv')) features.hyperv = { relaxed: {}, vapic: {}, spinlocks: { spinlocks: 8191 } };
  const disks: Record<string, unknown>[] = [{ name: 'rootdisk', disk: { bus: 'virtio' }, bootOrder: 1 }];
  const volumes: Record<string, unknown>[] = [{ name: 'rootdisk', dataVolume: { name: `${vm.name}-root` } }];
  if (image.cloudInit) {
    disks.push({ name: 'cloudinitdisk', disk: { bus: 'virtio' } });
    volumes.push({ name: 'cloudinitdisk', cloudInitNoCloud: { userData: image.cloudInit } });
  }
  const memory = `${vm.memoryGib}Gi`;
  return {
    apiVersion: KINDS.vm.apiVersion,
    kind: KINDS.vm.kind,
    metadata: {
      name: vm.name,
      namespace: vm.namespace,
      labels: ownerLabels(ctx, vm.customerId, vm.organization),
      annotations: { [REQUEST]: request, [OS_NAME]: image.osName },
    },
    spec: {
      runStrategy: 'Always',
      dataVolumeTemplates: [
        {
          metadata: { name: `${vm.name}-root` },
          spec: { source: { http: { url: image.url } }, storage: { resources: { requests: { storage: `${vm.storageGib}Gi` } } } },
        },
      ],
      template: {
        metadata: { labels: { 'kubevirt.io/vm': vm.name } },
        spec: {
          domain: {
            cpu: { cores: vm.vcpu },
            memory: { guest: memory },
            resources: { requests: { cpu: String(vm.vcpu), memory } },
            machine: { type: image.machineType },
            ...(image.firmware === 'efi' ? { firmware: { bootloader: { efi: { secureBoot: image.features.includes('smm') } } } } : {}),
            features,
            devices: { disks, ...(image.features.includes('tpm') ? { tpm: {} } : {}) },
          },
          volumes,
        },
      },
    },
  };
}

/** Why the VM does not fit the customer's quota or its project's cap (counting the VMs that run), or undefined. */
async function overQuota(d: Driver, vm: PlatformVm): Promise<string | undefined> {
  const customer: VmResources = { vcpu: 0, memory_gib: 0, storage_gib: 0 };
  const project: VmResources = { vcpu: 0, memory_gib: 0, storage_gib: 0 };
  for (const projectObject of await d.kube.list(KINDS.project, vm.organization)) {
    const namespace = String(projectObject.status?.namespace ?? `${vm.organization}-${projectObject.metadata.name}`);
    for (const existing of await d.kube.list(KINDS.vm, namespace)) {
      if (isDeleting(existing)) continue;
      const size = sizeOf(existing);
      for (const key of ['vcpu', 'memory_gib', 'storage_gib'] as const) {
        customer[key] += size[key];
        if (namespace === vm.namespace) project[key] += size[key];
      }
    }
  }
  const asked: VmResources = { vcpu: vm.vcpu, memory_gib: vm.memoryGib, storage_gib: vm.storageGib };
  const units = { vcpu: 'vCPU', memory_gib: 'GiB of memory', storage_gib: 'GiB of storage' } as const;
  for (const key of ['vcpu', 'memory_gib', 'storage_gib'] as const) {
    const free = vm.quota.customer[key] - customer[key];
    if (asked[key] > free)
      return `The VM needs ${asked[key]} ${units[key]}; the customer's quota has ${Math.max(0, free)} of ${vm.quota.customer[key]} free.`;
    const cap = vm.quota.project[key];
    if (cap !== undefined && asked[key] > cap - project[key])
      return `The VM needs ${asked[key]} ${units[key]}; the project's cap has ${Math.max(0, cap - project[key])} of ${cap} free.`;
  }
  return undefined;
}

/** What a VM holds: its cores, its guest memory and its DataVolumes' storage (a VM without them counts 1 vCPU, 1 GiB). */
function sizeOf(vm: KubeObject): VmResources {
  const spec = (vm.spec ?? {}) as {
    template?: { spec?: { domain?: { cpu?: { cores?: number }; memory?: { guest?: string } } } };
    dataVolumeTemplates?: Array<{ spec?: { storage?: { resources?: { requests?: { storage?: string } } } } }>;
  };
  const domain = spec.template?.spec?.domain ?? {};
  const storage = (spec.dataVolumeTemplates ?? []).reduce(
    (sum, dv) => sum + gibibytes(dv.spec?.storage?.resources?.requests?.storage ?? '0Gi'),
    0,
  );
  return { vcpu: domain.cpu?.cores ?? 1, memory_gib: gibibytes(domain.memory?.guest ?? '1Gi'), storage_gib: storage };
}

/** A Kubernetes quantity in GiB (Ki/Mi/Gi/Ti and their decimal forms; a bare number is bytes). */
export function gibibytes(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(quantity.trim());
  if (!match) return 0;
  const scale: Record<string, number> = {
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
  };
  return (Number(match[1]) * (scale[match[2] ?? ''] ?? 1)) / 2 ** 30;
}
