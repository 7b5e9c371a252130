import type { Db } from '../infra/db/database.ts';
import type { KeyMode, OperationType, PlatformScope } from '../infra/db/schema.ts';

/**
 * The seam between provisioning and the platform that runs customers'
 * workloads. Tenantry's services and its operation engine speak only this
 * interface; `sandbox` implements it inside our database (CONTRACT §8), a
 * `kubernetes` driver will implement it on a real cluster (Kube-DC:
 * an Organization with its namespace, Projects with a workload CIDR and a
 * namespace `{organization}-{project}`, users in the identity provider).
 *
 * Every call is idempotent: the engine may repeat a step after a crash, and
 * asks again until a step reports `done` or `failed`.
 */
export interface Platform {
  readonly name: 'sandbox' | 'kubernetes';

  /** Creates (or looks at) the customer's organization and its namespace. */
  createOrganization(ctx: PlatformContext, org: { customerId: string; displayName: string | null }): Promise<Progress>;
  /** Tears the organization down with everything in it; `done` once it is gone. */
  deleteOrganization(ctx: PlatformContext, customerId: string): Promise<Progress>;

  /** Reserves a workload address range for a project; undefined when the pool is exhausted. */
  allocateAddressRange(ctx: PlatformContext, namespace: string): Promise<string | undefined>;
  createProject(ctx: PlatformContext, project: { customerId: string; name: string; namespace: string; cidr: string }): Promise<Progress>;
  /** Finalizes a project's deletion and releases its address range; `done` once it is gone. */
  deleteProject(ctx: PlatformContext, project: { customerId: string; namespace: string }): Promise<Progress>;

  createUser(ctx: PlatformContext, user: PlatformUser): Promise<void>;
  deleteUser(ctx: PlatformContext, user: { customerId: string; username: string }): Promise<void>;

  /** The customer's live VMs and databases, and whether they run. */
  listWorkloads(ctx: PlatformContext, customerId: string): Promise<Workloads>;
  stopWorkloads(ctx: PlatformContext, customerId: string): Promise<Workloads>;
  startWorkloads(ctx: PlatformContext, customerId: string): Promise<Workloads>;

  /**
   * Creates a VM in a project's namespace from an OS image (the console's form). Idempotent: the same VM
   * asked again is `done`; another VM of that name is `failed` with `ALREADY_EXISTS`. From then on it is
   * one of the customer's workloads, named `<namespace>/<name>` by listWorkloads. A VM that does not fit
   * the quota is `failed` with `QUOTA_EXCEEDED`, as a namespace's resource quota refuses it on a cluster.
   */
  createVm(ctx: PlatformContext, vm: PlatformVm): Promise<Progress>;

  /** GPUs the customer's running workloads hold, per profile; undefined when the platform cannot tell now. */
  gpuUsage(ctx: PlatformContext, customerId: string): Promise<Record<string, number> | undefined>;
  /**
   * Resource-hours the customers' workloads used within [from, to), on the mode's clock. `since` is the
   * customer's creation: an earlier customer of the same id is not counted.
   */
  usage(ctx: PlatformContext, customers: { customerId: string; since: Date }[], from: Date, to: Date): Promise<Map<string, UsageTotals>>;

  /**
   * Asks the identity provider whether the user can be logged in now. A user
   * with pending required actions (verify email, update password, ...) cannot.
   */
  prepareConsoleLogin(ctx: PlatformContext, user: { customerId: string; username: string }): Promise<{ requiredActions: string[] }>;
}

export interface PlatformContext {
  /** Where the call runs. The sandbox writes through it, so its changes join the caller's transaction. */
  db: Db;
  partnerId: string;
  mode: KeyMode;
  scope: PlatformScope;
  /** The partner's clock for this mode (test mode's clock can be advanced). */
  now: Date;
  /**
   * The operation this step belongs to, if any: the sandbox's failure injection matches on it, and its
   * simulated work is timed from the operation's creation, however late the engine first looks.
   */
  operation?: { type: OperationType; customerId: string; project: string | null; createdAt: Date };
}

export type Progress =
  | { state: 'done' }
  /** Not finished: look again at `until`. */
  | { state: 'in_progress'; until: Date }
  | { state: 'failed'; code: string; message: string };

export interface PlatformUser {
  customerId: string;
  username: string;
  email: string;
  role: 'admin' | 'member';
  firstName: string | null;
  lastName: string | null;
}

/** A VM as the console asks for it: every image setting resolved (defaults applied: decision 139). */
export interface PlatformVm {
  customerId: string;
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

export interface VmResources {
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
}

export interface Workloads {
  vms: string[];
  databases: string[];
  gpus: Record<string, number>;
  running: boolean;
}

export interface UsageTotals {
  vcpu_hours: number;
  memory_gib_hours: number;
  storage_gib_hours: number;
  gpu_hours: Record<string, number>;
}

export const NO_WORKLOADS: Workloads = { vms: [], databases: [], gpus: {}, running: false };

/** The number of VMs and databases running: `workloads_running` in suspend and resume. */
export function workloadsRunning(workloads: Workloads): number {
  return workloads.running ? workloads.vms.length + workloads.databases.length : 0;
}

/** `live`: one platform shared by every partner; `test:<partner>`: the partner's own sandbox. */
export function platformScope(partnerId: string, mode: KeyMode): PlatformScope {
  return mode === 'live' ? 'live' : `test:${partnerId}`;
}
