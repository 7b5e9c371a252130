import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type {
  AddressRange,
  ConsoleLoginGrant,
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
import type { KubernetesPlatformConfig } from './config.ts';
import type { Driver } from './driver.ts';
import * as identity from './identity.ts';
import { KeycloakAdmin } from './keycloak.ts';
import { KubeClient } from './kube.ts';
import * as organizations from './organizations.ts';
import * as projects from './projects.ts';
import { usage } from './usage.ts';
import * as vmChanges from './vm-changes.ts';
import * as vms from './vms.ts';
import * as workloads from './workloads.ts';

/**
 * The kubernetes platform (docs/platform-kubernetes.md): customers as Kube-DC Organizations with their own
 * Keycloak realm, projects as Kube-DC Projects, workloads as KubeVirt VMs and Kube-DC databases. It keeps
 * no state of its own: every call reads the cluster and the identity provider and continues from there.
 */
export class KubernetesPlatform implements Platform {
  readonly name = 'kubernetes' as const;
  readonly #d: Driver;

  constructor(driver: Driver) {
    this.#d = driver;
  }

  ensureOrganization(ctx: PlatformContext, org: OrganizationSpec): Promise<Progress> {
    return organizations.ensureOrganization(this.#d, ctx, org);
  }

  deleteOrganization(ctx: PlatformContext, org: OrganizationRef): Promise<Progress> {
    return organizations.deleteOrganization(this.#d, ctx, org);
  }

  reserveAddressRange(ctx: PlatformContext, project: ProjectRef): Promise<AddressRange> {
    return projects.reserveAddressRange(this.#d, ctx, project);
  }

  ensureProject(ctx: PlatformContext, project: ProjectSpec): Promise<Progress> {
    return projects.ensureProject(this.#d, ctx, project);
  }

  deleteProject(ctx: PlatformContext, project: ProjectRef): Promise<Progress> {
    return projects.deleteProject(this.#d, ctx, project);
  }

  ensureUser(ctx: PlatformContext, user: UserSpec): Promise<Progress> {
    return identity.ensureUser(this.#d, ctx, user);
  }

  deleteUser(ctx: PlatformContext, user: UserRef): Promise<Progress> {
    return identity.deleteUser(this.#d, ctx, user);
  }

  applyQuota(ctx: PlatformContext, org: OrganizationRef, quota: QuotaSpec): Promise<Progress> {
    return organizations.applyQuota(this.#d, ctx, org, quota);
  }

  listWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    return workloads.listWorkloads(this.#d, ctx, org);
  }

  stopWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    return workloads.stopWorkloads(this.#d, ctx, org);
  }

  startWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    return workloads.startWorkloads(this.#d, ctx, org);
  }

  gpuUsage(ctx: PlatformContext, org: OrganizationRef): Promise<Record<string, number> | undefined> {
    return workloads.gpuUsage(this.#d, ctx, org);
  }

  usage(ctx: PlatformContext, customers: UsageSubject[], from: Date, to: Date): Promise<Map<string, UsageTotals> | undefined> {
    return usage(this.#d, ctx, customers, from, to);
  }

  createVm(ctx: PlatformContext, vm: PlatformVm): Promise<VmCreation> {
    return vms.createVm(this.#d, ctx, vm);
  }

  stopVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange> {
    return vmChanges.setVmRunning(this.#d, ctx, vm, false);
  }

  startVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange> {
    return vmChanges.setVmRunning(this.#d, ctx, vm, true);
  }

  deleteVm(ctx: PlatformContext, vm: VmRef): Promise<VmChange> {
    return vmChanges.deleteVm(this.#d, ctx, vm);
  }

  heldResources(ctx: PlatformContext, org: OrganizationRef): Promise<HeldResources> {
    return vmChanges.heldResources(this.#d, ctx, org);
  }

  prepareConsoleLogin(ctx: PlatformContext, user: UserRef): Promise<ConsoleLoginGrant> {
    return identity.prepareConsoleLogin(this.#d, ctx, user);
  }
}

/** The cluster's KubeConfig: the configured kubeconfig file, or the in-cluster service account. */
export function kubeConfigFor(config: KubernetesPlatformConfig): KubeConfig {
  const kc = new KubeConfig();
  if (config.kubeconfig) kc.loadFromFile(config.kubeconfig);
  else kc.loadFromCluster();
  return kc;
}

/** What the composition root calls when TENANTRY_PLATFORM=kubernetes (live mode; test mode stays on the sandbox). */
export function createKubernetesPlatform(
  config: KubernetesPlatformConfig,
  logger: Logger,
  kubeConfig: KubeConfig = kubeConfigFor(config),
  options: { kubeTimeoutMs?: number } = {},
): KubernetesPlatform {
  const kube = new KubeClient(kubeConfig, { timeoutMs: options.kubeTimeoutMs });
  const writer = config.kubeDcServiceAccount
    ? new KubeClient(kubeConfig, {
        timeoutMs: options.kubeTimeoutMs,
        impersonate: `system:serviceaccount:${config.kubeDcNamespace}:${config.kubeDcServiceAccount}`,
      })
    : kube;
  return new KubernetesPlatform({
    kube,
    kubeDcWriter: writer,
    idp: new KeycloakAdmin(config.identity),
    config,
    logger: logger.child({ platform: 'kubernetes' }),
  });
}
