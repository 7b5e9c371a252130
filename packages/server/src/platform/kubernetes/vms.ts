import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PlatformContext, PlatformVm, VmCreation, VmResources } from '../platform.ts';
import { type Driver, isDeleting, ownedBy, ownerLabels } from './driver.ts';
import { KINDS, type KubeObject, kubeMessage, kubeStatus } from './kube.ts';
import { orUnavailable } from './progress.ts';
import { limitRangeProblem } from './resources.ts';
import { heldByOrganization } from './vm-changes.ts';

/** On a VM Tenantry made: a digest of what was asked (a repeat of the same request is done, another is a conflict). */
const REQUEST = 'tenantry.io/vm-request';
const OS_NAME = 'tenantry.io/os-name';
/** KubeVirt's limit on inline NoCloud user data. */
export const CLOUD_INIT_MAX_BYTES = 2048;
/** How long a new VM is watched for KubeVirt refusing its launcher pod before it counts as started. */
export const VM_START_CHECK_MS = 3_000;

/**
 * A VM from the console's form, built as Kube-DC's own wizard builds one (skills/create-vm/vm-template.yaml
 * in kube-dc-public): a VirtualMachine on the project's Multus `default` network through a bridge
 * interface, the project's `authorized-keys-default` keys given to the image's user by the guest agent,
 * and a root disk that is a DataVolume of its own (`<name>-disk`, imported from the image's URL, on
 * TENANTRY_VM_STORAGE_CLASS), owned by the VM so it goes with it. CPU and memory are requested and
 * limited as asked, checked first against the customer's quota, the project's cap and the plan's
 * LimitRange (which admits the VM's launcher pod); a refusal KubeVirt reports in the first seconds
 * (its launcher pod refused) is the answer too.
 */
export function createVm(d: Driver, ctx: PlatformContext, vm: PlatformVm): Promise<VmCreation> {
  return orUnavailable('create a VM', async (): Promise<VmCreation> => {
    // KubeVirt's admission refuses inline cloud-init over 2,048 bytes: say so instead of a bare 422.
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
    const limited = limitRangeProblem(await d.kube.list(KINDS.limitRange, vm.namespace), { cpu: vm.vcpu, memoryGib: vm.memoryGib });
    if (limited) return { state: 'refused', code: 'UPSTREAM_403', message: `The plan's limits refuse the VM: ${limited}` };
    let created: KubeObject;
    try {
      const made = await d.kube.createOrGet(manifest(ctx, vm, request));
      if (!made.created) return sameRequest(made.object, ctx, vm, request);
      created = made.object;
      await d.kube.createIfAbsent(rootDisk(d, vm, created));
    } catch (error) {
      const refused = refusalOf(error);
      if (refused) return refused;
      throw error;
    }
    return startCheck(d, vm);
  });
}

function refusalOf(error: unknown): VmCreation | undefined {
  const status = kubeStatus(error);
  // Admission of a ResourceQuota or an HRQ: "exceeded quota".
  if (status === 403 && /quota/i.test(kubeMessage(error)))
    return { state: 'refused', code: 'QUOTA_EXCEEDED', message: `The cluster refused the VM: ${kubeMessage(error)}`.slice(0, 500) };
  if (status === 400 || status === 403 || status === 404 || status === 422)
    return { state: 'refused', code: `UPSTREAM_${status}`, message: `The cluster refused the VM: ${kubeMessage(error)}`.slice(0, 500) };
  return undefined;
}

/**
 * Waits a little for KubeVirt to start the VM or refuse its launcher pod (a `FailedCreate` on its
 * `Synchronized` condition, or a `Failure` condition): a refused VM is taken away again, so the name
 * is free for a corrected request, and answered with the platform's words.
 */
async function startCheck(d: Driver, vm: PlatformVm): Promise<VmCreation> {
  const deadline = Date.now() + VM_START_CHECK_MS;
  for (;;) {
    const current = await d.kube.get(KINDS.vm, vm.name, vm.namespace);
    const failure = current ? failureOf(current) : undefined;
    if (failure) {
      await d.kube.delete(KINDS.vm, vm.name, vm.namespace);
      return { state: 'refused', code: 'UPSTREAM_403', message: `The cluster refused the VM: ${failure}`.slice(0, 500) };
    }
    if (!current || current.status?.created === true || Date.now() >= deadline) return { state: 'done' };
    await sleep(250);
  }
}

/** The message of a VM's failure as KubeVirt reports it, or undefined. */
function failureOf(object: KubeObject): string | undefined {
  const conditions = (object.status?.conditions as Array<Record<string, unknown>> | undefined) ?? [];
  const failed =
    conditions.find((c) => c.type === 'Failure' && c.status === 'True') ??
    conditions.find((c) => c.type === 'Synchronized' && c.status === 'False' && c.reason === 'FailedCreate');
  return failed ? String(failed.message ?? failed.reason ?? 'refused') : undefined;
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
  const disks: Record<string, unknown>[] = [{ name: 'root', disk: { bus: 'virtio' }, bootOrder: 1 }];
  const volumes: Record<string, unknown>[] = [{ name: 'root', dataVolume: { name: diskName(vm) } }];
  if (image.cloudInit) {
    disks.push({ name: 'cloudinit', disk: { bus: 'virtio' } });
    volumes.push({ name: 'cloudinit', cloudInitNoCloud: { userData: image.cloudInit } });
  }
  const memory = `${vm.memoryGib}Gi`;
  const labels = { 'app.kubernetes.io/name': vm.name };
  return {
    apiVersion: KINDS.vm.apiVersion,
    kind: KINDS.vm.kind,
    metadata: {
      name: vm.name,
      namespace: vm.namespace,
      labels: { ...ownerLabels(ctx, vm.customerId, vm.organization), ...labels },
      annotations: { [REQUEST]: request, [OS_NAME]: image.osName },
    },
    spec: {
      runStrategy: 'Always',
      template: {
        metadata: { labels },
        spec: {
          accessCredentials: [
            {
              sshPublicKey: {
                source: { secret: { secretName: 'authorized-keys-default' } },
                propagationMethod: { qemuGuestAgent: { users: [image.cloudUser] } },
              },
            },
          ],
          domain: {
            cpu: { cores: vm.vcpu },
            memory: { guest: memory },
            // Limits as well as requests: the plan's LimitRange would otherwise give the launcher pod its
            // default limits, below what the VM asks, and the pod would be refused.
            resources: { requests: { cpu: String(vm.vcpu), memory }, limits: { cpu: String(vm.vcpu), memory } },
            machine: { type: image.machineType },
            ...(image.firmware === 'efi' ? { firmware: { bootloader: { efi: { secureBoot: image.features.includes('smm') } } } } : {}),
            features,
            devices: {
              disks,
              interfaces: [{ name: 'default', bridge: {} }],
              ...(image.features.includes('tpm') ? { tpm: {} } : {}),
            },
          },
          networks: [{ name: 'default', multus: { default: true, networkName: `${vm.namespace}/default` } }],
          volumes,
        },
      },
    },
  };
}

function diskName(vm: Pick<PlatformVm, 'name'>): string {
  return `${vm.name}-disk`;
}

/** The VM's root disk, imported from the image, owned by the VM (deleting the VM deletes it). */
function rootDisk(d: Driver, vm: PlatformVm, owner: KubeObject): KubeObject {
  return {
    apiVersion: KINDS.dataVolume.apiVersion,
    kind: KINDS.dataVolume.kind,
    metadata: {
      name: diskName(vm),
      namespace: vm.namespace,
      labels: { ...owner.metadata.labels },
      ownerReferences: [
        { apiVersion: KINDS.vm.apiVersion, kind: KINDS.vm.kind, name: vm.name, uid: owner.metadata.uid ?? '', controller: false },
      ],
    },
    spec: {
      source: { http: { url: vm.image.url } },
      pvc: {
        accessModes: ['ReadWriteOnce'],
        resources: { requests: { storage: `${vm.storageGib}Gi` } },
        ...(d.config.vmStorageClass ? { storageClassName: d.config.vmStorageClass } : {}),
      },
    },
  };
}

/** Why the VM does not fit the customer's quota or its project's cap (counting the VMs there and their disks), or undefined. */
async function overQuota(d: Driver, vm: PlatformVm): Promise<string | undefined> {
  const held = await heldByOrganization(d, vm.organization);
  const customer = held.customer;
  const project = held.namespaces[vm.namespace] ?? { vcpu: 0, memory_gib: 0, storage_gib: 0 };
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
