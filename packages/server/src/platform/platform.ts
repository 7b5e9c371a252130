import { ApiError } from '../infra/errors/catalogue.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { FailureCode } from './failures.ts';

/**
 * The seam between provisioning and the platform that runs customers' workloads. Tenantry's
 * services and its operation engine speak only this interface; `sandbox` simulates it in tables of
 * its own (CONTRACT §8), `kubernetes` drives a Kube-DC cluster and its identity provider.
 *
 * Rules every driver keeps (the conformance suite in `platform/conformance.ts` checks them):
 * - No call is made with a database transaction open: a driver may take seconds. A driver keeps its
 *   own state (if any) through its own connection use, never through the caller's transaction.
 * - Every call is idempotent. The engine repeats a step after a crash or a lost lease, and asks
 *   again until it reports `done` or `failed`; a repeated create finds what the first made.
 * - Long work reports progress instead of blocking: `in_progress` with when to look again.
 * - Expected failures are values, not exceptions: `failed` with a code of the failure vocabulary
 *   (failures.ts), or `unavailable` for "the platform cannot answer now, look again later". A thrown
 *   error is a bug or an outage: the engine logs it once and retries with backoff.
 */
export interface Platform {
  readonly name: string;

  /** Creates (or looks at) the customer's organization: its namespace and identity realm. */
  ensureOrganization(ctx: PlatformContext, org: OrganizationSpec): Promise<Progress>;
  /** Tears the organization down with everything in it; `done` once it is gone. */
  deleteOrganization(ctx: PlatformContext, org: OrganizationRef): Promise<Progress>;

  /** Reserves the project's workload address range (the same one on every repeat); `NO_ADDRESS_SPACE` when none is left. */
  reserveAddressRange(ctx: PlatformContext, project: ProjectRef): Promise<AddressRange>;
  /** Creates (or looks at) a project with its range; `done` once it is ready. */
  ensureProject(ctx: PlatformContext, project: ProjectSpec): Promise<Progress>;
  /** Finalizes a project's deletion and releases its address range; `done` once it is gone. */
  deleteProject(ctx: PlatformContext, project: ProjectRef): Promise<Progress>;

  /** Creates (or looks at) a user in the organization's identity realm; needs the organization. */
  ensureUser(ctx: PlatformContext, user: UserSpec): Promise<Progress>;
  /** Removes a user; `done` once gone (also when it never existed). */
  deleteUser(ctx: PlatformContext, user: UserRef): Promise<Progress>;

  /** Applies the customer's plan and quota as the platform expects (an organization's plan and the quota objects it derives). */
  applyQuota(ctx: PlatformContext, org: OrganizationRef, quota: QuotaSpec): Promise<Progress>;

  /**
   * Optional, for a driver that can take a new customer whole: its organization with its plan and
   * quota, its owner and its first project with an address range, in one call (`customer.create`
   * uses it when the driver has it). It leaves what `ensureOrganization`, `applyQuota`,
   * `ensureUser`, `reserveAddressRange` and `ensureProject` in that order would, and answers as they
   * would together: `done` with the project's range once all are there, or `in_progress` until a
   * time (with the range once the project has one). It answers undefined whenever it cannot take the
   * customer whole now (a failure that may be injected, an object not as a new customer's would be, a
   * range it has to look harder for); the engine then makes those calls one by one, and they pick up
   * whatever it made. Idempotent, like every call.
   */
  provisionCustomer?(ctx: PlatformContext, customer: CustomerSpec): Promise<CustomerProgress | undefined>;

  /** The customer's live VMs and databases, and whether they run. Throws PlatformUnavailableError when it cannot tell now. */
  listWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads>;
  /** Stops them (suspension, teardown); answers what there is afterwards. */
  stopWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads>;
  /** Starts what a suspension stopped (resume). */
  startWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads>;

  /**
   * Creates a VM in a project's namespace from an OS image (the console's form), answering at once (a
   * request waits for it). Idempotent: the same VM asked again is `done`; another VM of that name is
   * `refused` with `ALREADY_EXISTS`. From then on it is one of the customer's workloads, named
   * `<namespace>/<name>` by listWorkloads. A VM that does not fit the quota is `refused` with
   * `QUOTA_EXCEEDED`, as a namespace's resource quota refuses it on a cluster. Throws
   * PlatformUnavailableError when the platform cannot answer now.
   */
  createVm(ctx: PlatformContext, vm: PlatformVm): Promise<VmCreation>;
  /**
   * Stops one of the customer's VMs (the console's Stop): it stays, with its disk and its place in the
   * quota, and runs no more; a resume after a suspension leaves it stopped. Stopping a stopped VM is
   * `done`; a VM the customer does not have is `refused` with `NOT_FOUND`. Throws
   * PlatformUnavailableError when the platform cannot answer now, as do `startVm` and `deleteVm`.
   */
  stopVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange>;
  /** Starts a stopped VM (the console's Start); starting a running VM is `done`, a VM the customer does not have `NOT_FOUND`. */
  startVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange>;
  /** Deletes a VM with its disk (the console's Delete): it leaves the workloads and the quota at once; `done` when it is gone already. */
  deleteVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange>;
  /**
   * What the customer's workloads hold against its quota now, counted as `createVm` counts them: in all,
   * and per project namespace (the project's cap). A stopped VM still holds its place. Throws
   * PlatformUnavailableError when the platform cannot answer now.
   */
  heldResources(ctx: PlatformContext, org: OrganizationRef): Promise<HeldResources>;

  /** GPUs the customer's running workloads hold, per profile; undefined when the platform cannot tell now. */
  gpuUsage(ctx: PlatformContext, org: OrganizationRef): Promise<Record<string, number> | undefined>;
  /**
   * Resource-hours the customers' workloads used within [from, to), on the mode's clock, by customer id.
   * `since` (creation) and `until` (deletion, if any) bound each customer: an earlier or later customer
   * of the same id is not counted. Undefined when the usage source cannot be read now.
   */
  usage(ctx: PlatformContext, customers: UsageSubject[], from: Date, to: Date): Promise<Map<string, UsageTotals> | undefined>;

  /**
   * Asks the identity provider whether the user can be logged in now, and, on platforms whose identity
   * provider mints the one-time login itself, for that login URL. A user with pending required actions
   * (verify email, update password, ...) cannot be logged in.
   */
  prepareConsoleLogin(ctx: PlatformContext, user: UserRef): Promise<ConsoleLoginGrant>;
}

/** Whose platform objects a call is about, and when. Never a database handle: drivers own their state. */
export interface PlatformContext {
  partnerId: string;
  mode: KeyMode;
  /** The partner's clock for this mode (test mode's clock can be advanced). */
  now: Date;
  /**
   * The operation this step belongs to, if any: the sandbox's failure injection matches on it, and its
   * simulated work is timed from the operation's creation, however late the engine first looks.
   */
  operation?: { id: string; type: OperationKind; customerId: string; project: string | null; createdAt: Date };
  /** Aborted when the caller stops waiting (a lease about to run out, a shutdown). */
  signal?: AbortSignal;
}

export type OperationKind = 'customer.create' | 'customer.delete' | 'project.create' | 'project.delete';

/** A customer as the platform names it: `organization` is its platform name, unique on the platform. */
export interface OrganizationRef {
  customerId: string;
  organization: string;
}

export interface OrganizationSpec extends OrganizationRef {
  displayName: string | null;
  planId: string;
}

export interface ProjectRef extends OrganizationRef {
  project: string;
  /** `<organization>-<project>`: the project's backing namespace. */
  namespace: string;
}

export interface ProjectSpec extends ProjectRef {
  cidr: string;
}

export interface UserRef extends OrganizationRef {
  username: string;
}

export interface UserSpec extends UserRef {
  email: string;
  role: 'admin' | 'member';
  /** The organization's owner: an organization admin in its realm. */
  isOwner: boolean;
  firstName: string | null;
  lastName: string | null;
}

export interface QuotaSpec {
  planId: string;
  quota: { vcpu: number; memory_gib: number; storage_gib: number; gpus: Record<string, number> };
  projectCaps: Record<string, Partial<{ vcpu: number; memory_gib: number; storage_gib: number; gpus: Record<string, number> }>>;
}

/** A new customer as `provisionCustomer` takes it. */
export interface CustomerSpec {
  organization: OrganizationSpec;
  quota: QuotaSpec;
  owner: UserSpec;
  project: ProjectRef;
}

/** What `provisionCustomer` reports: all there, or not yet (the project's range once it has one). */
export type CustomerProgress = { state: 'done'; cidr: string } | { state: 'in_progress'; until: Date; cidr: string | null };

export type Progress =
  | { state: 'done' }
  /** Not finished: look again at `until`. */
  | { state: 'in_progress'; until: Date }
  | { state: 'failed'; code: FailureCode; message: string }
  /** The platform cannot answer now (an outage, a throttle): not a failure of the step; look again later. */
  | { state: 'unavailable'; reason: string; retryAfterMs?: number };

export type AddressRange = { state: 'done'; cidr: string } | Exclude<Progress, { state: 'done' }>;

export type ConsoleLoginGrant =
  | { state: 'action_required'; actions: string[] }
  /** `url` when the identity provider minted the login itself; otherwise Tenantry mints its own link. */
  | { state: 'ready'; url?: string; expiresAt?: Date };

/** A VM as the console asks for it: every image setting resolved (defaults applied). */
export interface PlatformVm extends OrganizationRef {
  namespace: string;
  name: string;
  vcpu: number;
  memoryGib: number;
  storageGib: number;
  image: {
    osName: string;
    url: string;
    cloudUser: string;
    firmware: 'bios' | 'efi';
    machineType: string;
    features: string[];
    cloudInit: string | null;
    bootOrder: string[];
    additionalDisks: string | null;
  };
  /** What the customer's VMs may hold together, and this project's VMs (the project's cap, if any). */
  quota: { customer: VmResources; project: Partial<VmResources> };
}

export type VmCreation =
  | { state: 'done' }
  | { state: 'refused'; code: 'ALREADY_EXISTS' | 'QUOTA_EXCEEDED' | `UPSTREAM_${number}`; message: string };

/** One VM of a customer: `namespace` is one of its projects' namespaces. */
export interface VmRef extends OrganizationRef {
  namespace: string;
  name: string;
}

export type VmChange = { state: 'done' } | { state: 'refused'; code: 'NOT_FOUND' | `UPSTREAM_${number}`; message: string };

export interface HeldResources {
  customer: VmResources;
  /** By project namespace; a namespace holding nothing may be absent. */
  namespaces: Record<string, VmResources>;
}

export interface VmResources {
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
}

export interface Workloads {
  vms: string[];
  databases: string[];
  gpus: Record<string, number>;
  /** Whether any of them runs (a suspension stops them all; the sandbox runs all or none). */
  running: boolean;
  /** Those among `vms` and `databases` that do not run while others do (a VM halted before a suspension, say). */
  halted?: string[];
}

export interface UsageSubject extends OrganizationRef {
  since: Date;
  until: Date | null;
}

export interface UsageTotals {
  vcpu_hours: number;
  memory_gib_hours: number;
  storage_gib_hours: number;
  gpu_hours: Record<string, number>;
}

/**
 * Thrown when the platform cannot answer now. A request that called the platform directly (suspend,
 * resume, console login, workloads, GPU usage) answers 503 UNAVAILABLE with `Retry-After`; the
 * operation engine treats it as "look again" after `retryAfterS`, without failing the operation.
 */
export class PlatformUnavailableError extends ApiError {
  readonly retryAfterS: number;

  constructor(message: string, retryAfterS = 5) {
    super('UNAVAILABLE', message, { retryAfter: retryAfterS });
    this.name = 'PlatformUnavailableError';
    this.retryAfterS = retryAfterS;
  }
}

export const NO_WORKLOADS: Workloads = { vms: [], databases: [], gpus: {}, running: false };

/** The number of VMs and databases running: `workloads_running` in suspend and resume. */
export function workloadsRunning(workloads: Workloads): number {
  if (!workloads.running) return 0;
  const halted = new Set(workloads.halted ?? []);
  return [...workloads.vms, ...workloads.databases].filter((name) => !halted.has(name)).length;
}
