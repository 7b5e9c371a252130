import { organizationRef } from '../customers/lifecycle.ts';
import type { CustomerTables } from '../customers/tables.ts';
import type { OsImageCatalogue } from '../images/catalogue.ts';
import { featureList, minimumsOf, type OsImage, VM_LIMITS } from '../images/fields.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { modeNowMs } from '../infra/mode.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import { DNS_LABEL } from '../platform/names.ts';
import type { HeldResources, Platform, PlatformContext, PlatformVm, VmChange } from '../platform/platform.ts';
import type { ConsoleSession } from './service.ts';
import type { ConsoleTables } from './tables.ts';

/** The console's machines view also reads the customer. */
type VmsDb = Db<ConsoleTables & CustomerTables>;

/** A VM as the console lists it: the platform says it exists and runs, the console's record adds the rest. */
export interface VmView {
  name: string;
  /** The project it lives in; null for a VM the platform reports outside any project (a test helper's). */
  project: string | null;
  /** Its namespace: the project's, when it is one of the customer's projects (then it can be stopped, started, deleted). */
  namespace: string | null;
  os_name: string | null;
  vcpu: number | null;
  memory_gib: number | null;
  storage_gib: number | null;
  running: boolean;
  created_by: string | null;
  created_at: Date | null;
}

/** The form's fields, as posted (strings); `FormField` names where a problem is shown. */
export type VmRequest = Record<'project' | 'name' | 'os' | 'vcpu' | 'memory_gib' | 'storage_gib', string>;
export type FormField = keyof VmRequest | 'form';
export type FormErrors = Partial<Record<FormField, string>>;
/** What a VM's row offers. */
export type VmAction = 'stop' | 'start' | 'delete';

export interface ConsoleVmDeps {
  db: VmsDb;
  clock: Clock;
  platform: Platform;
  images: OsImageCatalogue;
  partnerCache: PartnerCache;
}

/**
 * The console's VMs: listing what the platform runs for the customer, and creating one from the form.
 * Every rule the browser checks is checked again here: the browser is a convenience, not a guard.
 */
export class ConsoleVmService {
  readonly #deps: ConsoleVmDeps;

  constructor(deps: ConsoleVmDeps) {
    this.#deps = deps;
  }

  async list(session: ConsoleSession): Promise<VmView[]> {
    const { db, platform } = this.#deps;
    const ctx = await this.#context(session);
    const workloads = await platform.listWorkloads(ctx, organizationRef(session.customer));
    const records = await db.selectFrom('console_vms').selectAll().where('customer_uid', '=', session.customer.uid).execute();
    const recorded = new Map(records.map((r) => [`${r.namespace}/${r.name}`, r]));
    const projects = new Map(session.projects.map((p) => [p.namespace, p.name]));
    return workloads.vms.map((full) => {
      const slash = full.indexOf('/');
      const namespace = slash > 0 ? full.slice(0, slash) : null;
      const record = recorded.get(full);
      return {
        name: slash > 0 ? full.slice(slash + 1) : full,
        project: namespace ? (projects.get(namespace) ?? namespace) : null,
        namespace,
        os_name: record?.os_name ?? null,
        vcpu: record?.vcpu ?? null,
        memory_gib: record?.memory_gib ?? null,
        storage_gib: record?.storage_gib ?? null,
        running: workloads.running && !(workloads.halted ?? []).includes(full),
        created_by: record?.created_by ?? null,
        created_at: record?.created_at ?? null,
      };
    });
  }

  /** Creates the VM the form asks for; the problems, field by field, when it cannot. */
  async create(session: ConsoleSession, request: VmRequest): Promise<{ vm: VmView } | { errors: FormErrors }> {
    const { customer } = session;
    if (customer.status !== 'active') {
      return {
        errors: { form: `Customer ${customer.id} is ${customer.status.replace('_', ' ')}: VMs can be created only while it is active.` },
      };
    }
    const errors: FormErrors = {};
    const project = session.projects.find((p) => p.name === request.project);
    if (!project) errors.project = 'Choose one of your projects.';
    else if (project.state !== 'ready')
      errors.project = `Project ${project.name} is ${project.state}; VMs can be created once it is ready.`;
    if (!new RegExp(DNS_LABEL).test(request.name)) {
      errors.name = 'Use 1 to 40 lower-case letters, digits and hyphens, starting and ending with a letter or digit.';
    }
    const image = this.#deps.images.find(request.os);
    if (!image)
      errors.os = request.os ? `${request.os} is no longer offered; choose another operating system.` : 'Choose an operating system.';
    const size = image ? checkSize(image, request, errors) : undefined;
    if (!project || !image || !size || Object.keys(errors).length > 0) return { errors };

    const ctx = await this.#context(session);
    const workloads = await this.#deps.platform.listWorkloads(ctx, organizationRef(customer));
    if (workloads.vms.includes(`${project.namespace}/${request.name}`)) {
      return { errors: { name: `Project ${project.name} already has a VM named ${request.name}.` } };
    }
    const vm: PlatformVm = {
      ...organizationRef(customer),
      namespace: project.namespace,
      name: request.name,
      ...size,
      image: platformImage(image),
      quota: { customer: session.quota.quota, project: session.quota.project_caps[project.name] ?? {} },
    };
    const outcome = await this.#deps.platform.createVm(ctx, vm);
    if (outcome.state === 'refused') {
      if (outcome.code === 'ALREADY_EXISTS') return { errors: { name: `Project ${project.name} already has a VM named ${request.name}.` } };
      return { errors: { form: outcome.code === 'QUOTA_EXCEEDED' ? outcome.message : `The platform refused the VM: ${outcome.message}` } };
    }
    const now = this.#deps.clock.now();
    await this.#deps.db
      .insertInto('console_vms')
      .values({
        customer_uid: customer.uid,
        namespace: project.namespace,
        name: request.name,
        os_name: image.OS_NAME,
        vcpu: size.vcpu,
        memory_gib: size.memoryGib,
        storage_gib: size.storageGib,
        created_by: session.user.username,
        created_at: now,
      })
      // A VM removed and made again under its name: the record says what was asked last.
      .onConflict((oc) =>
        oc.columns(['customer_uid', 'namespace', 'name']).doUpdateSet({
          os_name: image.OS_NAME,
          vcpu: size.vcpu,
          memory_gib: size.memoryGib,
          storage_gib: size.storageGib,
          created_by: session.user.username,
          created_at: now,
        }),
      )
      .execute();
    return {
      vm: {
        name: request.name,
        project: project.name,
        namespace: project.namespace,
        os_name: image.OS_NAME,
        vcpu: size.vcpu,
        memory_gib: size.memoryGib,
        storage_gib: size.storageGib,
        running: true,
        created_by: session.user.username,
        created_at: now,
      },
    };
  }

  /** What the customer's workloads hold against its quota now, as a creation counts it (the quota card, the form's free room). */
  async held(session: ConsoleSession): Promise<HeldResources> {
    return this.#deps.platform.heldResources(await this.#context(session), organizationRef(session.customer));
  }

  /**
   * Stops, starts or deletes one of the customer's VMs (the buttons of its row). A deleted VM's record goes
   * too. What the person is told when it cannot be done, with the page's status.
   */
  async change(
    session: ConsoleSession,
    projectName: string,
    name: string,
    change: VmAction,
  ): Promise<{ state: 'done' } | { state: 'refused'; status: 404 | 409; message: string }> {
    const project = session.projects.find((p) => p.name === projectName);
    if (!project || !new RegExp(DNS_LABEL).test(name)) {
      return { state: 'refused', status: 404, message: `There is no VM ${name} in project ${projectName}.` };
    }
    const { platform, db } = this.#deps;
    const ctx = await this.#context(session);
    const vm = { ...organizationRef(session.customer), namespace: project.namespace, name };
    const outcome: VmChange =
      change === 'stop'
        ? await platform.stopVm(ctx, vm)
        : change === 'start'
          ? await platform.startVm(ctx, vm)
          : await platform.deleteVm(ctx, vm);
    if (outcome.state === 'refused') {
      if (outcome.code === 'NOT_FOUND')
        return { state: 'refused', status: 404, message: `There is no VM ${name} in project ${project.name}: it may have been deleted.` };
      return { state: 'refused', status: 409, message: `The platform refused to ${change} ${name}: ${outcome.message}` };
    }
    if (change === 'delete') {
      await db
        .deleteFrom('console_vms')
        .where('customer_uid', '=', session.customer.uid)
        .where('namespace', '=', project.namespace)
        .where('name', '=', name)
        .execute();
    }
    return { state: 'done' };
  }

  /** Forgets the records of VMs whose customer is gone (its VMs were removed before it could be deleted). */
  async deleteOrphanRecords(): Promise<void> {
    await this.#deps.db
      .deleteFrom('console_vms')
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('customers').select('uid').whereRef('customers.uid', '=', 'console_vms.customer_uid'))),
      )
      .execute();
  }

  /** The platform context of the session's customer: its partner, mode and that mode's clock. */
  async #context(session: ConsoleSession): Promise<PlatformContext> {
    const { clock, partnerCache } = this.#deps;
    const { customer } = session;
    const partner = await partnerCache.get(customer.partner_id);
    const now = new Date(modeNowMs(clock, partner?.test_clock_offset_ms ?? 0, customer.mode));
    return { partnerId: customer.partner_id, mode: customer.mode, now };
  }
}

/** The form's sizes as whole numbers within the image's minimums and the largest VM; problems into `errors`. */
function checkSize(
  image: OsImage,
  request: VmRequest,
  errors: FormErrors,
): { vcpu: number; memoryGib: number; storageGib: number } | undefined {
  const minimum = minimumsOf(image);
  const fields = [
    ['vcpu', minimum.vcpu, VM_LIMITS.vcpu, 'vCPU'],
    ['memory_gib', minimum.memoryGib, VM_LIMITS.memoryGib, 'GiB'],
    ['storage_gib', minimum.storageGib, VM_LIMITS.storageGib, 'GiB'],
  ] as const;
  const values: number[] = [];
  for (const [field, min, max, unit] of fields) {
    const raw = request[field].trim();
    const value = /^\d{1,6}$/.test(raw) ? Number(raw) : Number.NaN;
    if (Number.isNaN(value)) errors[field] = 'Enter a whole number.';
    else if (value < min) errors[field] = `${image.OS_NAME} needs at least ${min} ${unit}.`;
    else if (value > max) errors[field] = `At most ${max} ${unit}.`;
    values.push(value);
  }
  const [vcpu, memoryGib, storageGib] = values;
  if (fields.some(([field]) => errors[field]) || vcpu === undefined || memoryGib === undefined || storageGib === undefined)
    return undefined;
  return { vcpu, memoryGib, storageGib };
}

/** The image settings a VM boots with, defaults applied where the entry is silent. */
function platformImage(image: OsImage): PlatformVm['image'] {
  const list = (value: string | undefined) => (value ? value.split(',').map((item) => item.trim()) : []);
  return {
    osName: image.OS_NAME,
    url: image.OS_IMAGE_URL,
    cloudUser: image.CLOUD_USER,
    firmware: image.FIRMWARE_TYPE === 'efi' ? 'efi' : 'bios',
    machineType: image.MACHINE_TYPE ?? 'q35',
    features: featureList(image.FEATURES),
    cloudInit: image.CLOUD_INIT ?? null,
    bootOrder: image.BOOT_ORDER ? list(image.BOOT_ORDER) : ['disk'],
    additionalDisks: image.ADDITIONAL_DISKS ?? null,
  };
}
