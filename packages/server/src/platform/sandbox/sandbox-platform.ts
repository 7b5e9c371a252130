import type { Kysely } from 'kysely';
import type {
  AddressRange,
  ConsoleLoginGrant,
  CustomerProgress,
  CustomerSpec,
  HeldResources,
  OrganizationRef,
  OrganizationSpec,
  Platform,
  PlatformContext,
  PlatformVm,
  Progress,
  ProjectRef,
  ProjectSpec,
  QuotaSpec,
  UsageSubject,
  UsageTotals,
  UserRef,
  UserSpec,
  VmChange,
  VmCreation,
  VmRef,
  Workloads,
} from '../platform.ts';
import * as identity from './identity.ts';
import * as organizations from './organizations.ts';
import * as projects from './projects.ts';
import { type Sandbox, scopeOf } from './state.ts';
import type { SandboxTables } from './tables.ts';
import * as usage from './usage.ts';
import * as workloads from './workloads.ts';

export interface SandboxOptions {
  /** The sandbox's own access to the database (its tables, its transactions: never a caller's). */
  db: Kysely<SandboxTables>;
  /** The customer's provisioning time (TENANTRY_SANDBOX_DELAY_MS); a project takes two thirds, teardown twenty times. */
  delayMs: number;
  /** Workload address ranges (/24) each partner has per mode; exhausting them gives NO_ADDRESS_SPACE. */
  addressRanges?: number | undefined;
  /** Simulated network latency of every call, in real time (TENANTRY_SANDBOX_CALL_MS). */
  callMs?: number | undefined;
}

/** Each partner's pool per mode: 10.0.0.0/14 cut into /24 ranges (1,024). */
export const DEFAULT_ADDRESS_RANGES = 1024;

/** A test-mode failure injected through `POST /test-helpers/failures`. */
export interface FailureInjection {
  type: 'customer.create' | 'project.create' | 'gpu_usage';
  code: string | null;
  message: string | null;
  customerId: string | null;
  project: string | null;
  count: number;
}

/**
 * The simulated platform of CONTRACT §8, kept in tables of its own: its organizations, projects
 * and users (`sandbox_objects`), address ranges, workloads, usage and injected failures. Objects
 * take realistic time to become ready or gone, measured on the caller's mode clock, so grace
 * periods, teardown and timeouts follow a test clock that is advanced. It writes through its own
 * short transactions, like a remote platform would keep its own state: never the caller's.
 */
export class SandboxPlatform implements Platform {
  readonly name = 'sandbox' as const;
  readonly #s: Sandbox;

  constructor(options: SandboxOptions) {
    this.#s = {
      db: options.db,
      customerMs: options.delayMs,
      projectMs: Math.round((options.delayMs * 2) / 3),
      teardownMs: options.delayMs * 20,
      ranges: options.addressRanges ?? DEFAULT_ADDRESS_RANGES,
      callMs: options.callMs ?? 0,
    };
  }

  ensureOrganization(ctx: PlatformContext, org: OrganizationSpec): Promise<Progress> {
    return organizations.ensureOrganization(this.#s, ctx, org);
  }

  deleteOrganization(ctx: PlatformContext, org: OrganizationRef): Promise<Progress> {
    return organizations.deleteOrganization(this.#s, ctx, org);
  }

  reserveAddressRange(ctx: PlatformContext, project: ProjectRef): Promise<AddressRange> {
    return projects.reserveAddressRange(this.#s, ctx, project);
  }

  ensureProject(ctx: PlatformContext, project: ProjectSpec): Promise<Progress> {
    return projects.ensureProject(this.#s, ctx, project);
  }

  deleteProject(ctx: PlatformContext, project: ProjectRef): Promise<Progress> {
    return projects.deleteProject(this.#s, ctx, project);
  }

  ensureUser(ctx: PlatformContext, user: UserSpec): Promise<Progress> {
    return identity.ensureUser(this.#s, ctx, user);
  }

  deleteUser(ctx: PlatformContext, user: UserRef): Promise<Progress> {
    return identity.deleteUser(this.#s, ctx, user);
  }

  applyQuota(ctx: PlatformContext, org: OrganizationRef, quota: QuotaSpec): Promise<Progress> {
    return organizations.applyQuota(this.#s, ctx, org, quota);
  }

  provisionCustomer(ctx: PlatformContext, customer: CustomerSpec): Promise<CustomerProgress | undefined> {
    return organizations.provisionCustomer(this.#s, ctx, customer);
  }

  /** Sandbox only (conformance and tests): the plan and quota last applied to an organization. */
  appliedQuota(ctx: PlatformContext, org: OrganizationRef): Promise<Omit<QuotaSpec, 'planId'> & { planId: string | undefined }> {
    return organizations.appliedQuota(this.#s, ctx, org);
  }

  /** Sandbox only (test helper): the identity provider's pending actions for a user. */
  setRequiredActions(ctx: PlatformContext, user: UserRef, actions: string[]): Promise<void> {
    return identity.setRequiredActions(this.#s, ctx, user, actions);
  }

  prepareConsoleLogin(ctx: PlatformContext, user: UserRef): Promise<ConsoleLoginGrant> {
    return identity.prepareConsoleLogin(this.#s, ctx, user);
  }

  listWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    return workloads.listWorkloads(this.#s, ctx, org);
  }

  stopWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    return workloads.stopWorkloads(this.#s, ctx, org);
  }

  startWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    return workloads.startWorkloads(this.#s, ctx, org);
  }

  /** Sandbox only (test helper): replaces the customer's live workloads. */
  setWorkloads(ctx: PlatformContext, org: OrganizationRef, next: Workloads): Promise<Workloads> {
    return workloads.setWorkloads(this.#s, ctx, org, next);
  }

  createVm(ctx: PlatformContext, vm: PlatformVm): Promise<VmCreation> {
    return workloads.createVm(this.#s, ctx, vm);
  }

  stopVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange> {
    return workloads.changeVm(this.#s, ctx, vm, 'stop');
  }

  startVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange> {
    return workloads.changeVm(this.#s, ctx, vm, 'start');
  }

  deleteVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange> {
    return workloads.changeVm(this.#s, ctx, vm, 'delete');
  }

  heldResources(ctx: PlatformContext, org: OrganizationRef): Promise<HeldResources> {
    return workloads.heldResources(this.#s, ctx, org);
  }

  gpuUsage(ctx: PlatformContext, org: OrganizationRef): Promise<Record<string, number> | undefined> {
    return workloads.gpuUsage(this.#s, ctx, org);
  }

  usage(ctx: PlatformContext, customers: UsageSubject[], from: Date, to: Date): Promise<Map<string, UsageTotals>> {
    return usage.usage(this.#s, ctx, customers, from, to);
  }

  /** Sandbox only (test helper): the next matching provisioning steps fail. */
  async injectFailure(ctx: PlatformContext, failure: FailureInjection): Promise<void> {
    await this.#s.db
      .insertInto('sandbox_failures')
      .values({
        platform_scope: scopeOf(ctx),
        type: failure.type,
        code: failure.code,
        message: failure.message,
        customer_id: failure.customerId,
        project: failure.project,
        remaining: failure.count,
        created_at: ctx.now,
      })
      .execute();
  }
}
