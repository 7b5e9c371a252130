import type { OrganizationRef, OrganizationSpec, PlatformContext, Progress, QuotaSpec } from '../platform.ts';
import { organizationEmail } from './config.ts';
import { ANNOTATIONS, type Driver, isDeleting, ownedBy, ownerLabels } from './driver.ts';
import { KINDS } from './kube.ts';
import { DONE, guard, later, readiness, readyMessage } from './progress.ts';
import { releaseRanges } from './projects.ts';
import { dropUserRecord } from './user-record.ts';

/** Organization.spec.description allows letters, digits, spaces and `.,-'` only (128 at most). */
function description(displayName: string | null): string | undefined {
  const cleaned = (displayName ?? '')
    .replace(/[^a-zA-Z0-9\s.,\-']/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 128);
  return cleaned || undefined;
}

/**
 * The customer's organization, in order: its namespace (Kube-DC puts an Organization in the namespace of
 * its own name), then the Organization with the plan annotations; done when Kube-DC reports it ready and
 * its identity realm, which Kube-DC's controller makes, is there. The realm is Kube-DC's: a realm of
 * that name found before the Organization was made by someone else, and the step fails rather than
 * take it over. Each step reads what is there first, so a repeat (or a restart after kill -9) continues
 * where the last one stopped.
 */
export function ensureOrganization(d: Driver, ctx: PlatformContext, org: OrganizationSpec): Promise<Progress> {
  return guard('organization', async () => {
    const name = org.organization;
    const namespace = await d.kube.get(KINDS.namespace, name);
    if (namespace && !ownedBy(namespace, ctx, org.customerId)) {
      if (isDeleting(namespace)) return later(ctx); // a namespace of the same name is still going away
      return {
        state: 'failed',
        code: 'PROVISIONING_FAILED',
        message: `The namespace ${name} already exists on the cluster and is not this customer's.`,
      };
    }
    if (isDeleting(namespace)) return later(ctx);
    if (!namespace) await d.kube.createIfAbsent({ ...KINDS.namespace, metadata: { name, labels: ownerLabels(ctx, org.customerId, name) } });

    let organization = await d.kube.get(KINDS.organization, name, name);
    if (isDeleting(organization)) return later(ctx);
    if (organization && !ownedBy(organization, ctx, org.customerId))
      return {
        state: 'failed',
        code: 'PROVISIONING_FAILED',
        message: `An Organization ${name} not made by Tenantry exists on the cluster.`,
      };
    if (!organization) {
      if (await d.idp.realmExists(name))
        return {
          state: 'failed',
          code: 'PROVISIONING_FAILED',
          message: `The identity realm ${name} exists before its Organization: Tenantry never takes over a realm Kube-DC did not make for it.`,
        };
      const desc = description(org.displayName);
      ({ object: organization } = await d.kube.createOrGet({
        ...KINDS.organization,
        metadata: {
          name,
          namespace: name,
          labels: ownerLabels(ctx, org.customerId, name),
          // Kube-DC's admission lets anyone set annotations when an Organization is created; only
          // Kube-DC's own namespace may change them later (applyQuota).
          annotations: { [ANNOTATIONS.planId]: org.planId, [ANNOTATIONS.subscription]: 'active' },
        },
        spec: { email: organizationEmail(d.config, name), ...(desc ? { description: desc } : {}) },
      }));
    }
    const judged = readiness(organization);
    if (judged === 'failed')
      return {
        state: 'failed',
        code: 'PROVISIONING_FAILED',
        message: `The platform could not set up the organization (${readyMessage(organization)}).`,
      };
    if (judged !== 'ready' || !(await d.idp.realmExists(name))) return later(ctx);
    return DONE;
  });
}

/**
 * Tears the organization down in the order Kube-DC needs: its Projects (each deletes its backing
 * namespace), then the Organization (its finalizer waits for the Projects; Kube-DC removes the realm
 * with it), then the namespace, then the address ranges and the user record kept for it. `done` only
 * once all are gone. The realm itself is never touched: it is Kube-DC's.
 */
export function deleteOrganization(d: Driver, ctx: PlatformContext, org: OrganizationRef): Promise<Progress> {
  return guard('organization deletion', async () => {
    const name = org.organization;
    const namespace = await d.kube.get(KINDS.namespace, name);
    // Never tear down what another customer (or someone else) owns under this name.
    if (namespace && !ownedBy(namespace, ctx, org.customerId) && !isDeleting(namespace)) {
      await releaseRanges(d, name);
      await dropUserRecord(d, name);
      return DONE;
    }
    if (namespace) {
      const projects = await d.kube.list(KINDS.project, name);
      for (const project of projects) if (!isDeleting(project)) await d.kube.delete(KINDS.project, project.metadata.name ?? '', name);
      if (projects.length > 0) return later(ctx);
      const organization = await d.kube.get(KINDS.organization, name, name);
      if (organization && ownedBy(organization, ctx, org.customerId)) {
        if (!isDeleting(organization)) await d.kube.delete(KINDS.organization, name, name);
        if (await d.kube.get(KINDS.organization, name, name)) return later(ctx);
      }
      if (!isDeleting(namespace)) await d.kube.delete(KINDS.namespace, name);
      if (await d.kube.get(KINDS.namespace, name)) return later(ctx);
    }
    await releaseRanges(d, name);
    await dropUserRecord(d, name);
    return DONE;
  });
}

const GIB = (n: number) => `${n}Gi`;

/** The ResourceQuota of a capped project: Tenantry's own name, since Kube-DC reserves `project-quota` to its backend. */
export const PROJECT_CAP_QUOTA = 'tenantry-project-cap';

/**
 * The plan and quota as Kube-DC expects them: the plan on the Organization's billing annotations (Kube-DC
 * derives its `plan-quota` HRQ and LimitRange from it), the customer's own quota as the
 * `tenantry-quota` HierarchicalResourceQuota in the organization namespace (HNC enforces it across every
 * project), and project caps as a `tenantry-project-cap` ResourceQuota in each capped project's namespace.
 * Kube-DC's admission lets only its own namespace's service accounts change an Organization's
 * annotations, so a plan change is sent as the service account TENANTRY_KUBE_DC_SERVICE_ACCOUNT (the
 * driver impersonates it); `project-quota` is reserved to Kube-DC's backend, so caps take a name of
 * their own (Kubernetes enforces every ResourceQuota of a namespace, and project admins cannot edit any).
 */
export function applyQuota(d: Driver, ctx: PlatformContext, org: OrganizationRef, quota: QuotaSpec): Promise<Progress> {
  return guard('quota', async () => {
    const name = org.organization;
    const organization = await d.kube.get(KINDS.organization, name, name);
    if (!organization || isDeleting(organization))
      return { state: 'failed', code: 'UPSTREAM_NOT_FOUND', message: `The organization ${name} is not on the cluster.` };
    const unknown = [
      ...Object.keys(quota.quota.gpus),
      ...Object.values(quota.projectCaps).flatMap((c) => Object.keys(c.gpus ?? {})),
    ].filter((profile) => !(profile in d.config.gpuProfiles));
    if (unknown.length > 0)
      return {
        state: 'failed',
        code: 'PROVISIONING_FAILED',
        message: `GPU profile ${unknown[0]} is not configured on this cluster (TENANTRY_GPU_PROFILES).`,
      };

    const annotations = organization.metadata.annotations ?? {};
    if (annotations[ANNOTATIONS.planId] !== quota.planId || annotations[ANNOTATIONS.subscription] !== 'active')
      await d.kubeDcWriter.mergePatch(KINDS.organization, name, name, {
        metadata: { annotations: { [ANNOTATIONS.planId]: quota.planId, [ANNOTATIONS.subscription]: 'active' } },
      });

    const labels = ownerLabels(ctx, org.customerId, name);
    await upsertHard(d, KINDS.hrq, 'tenantry-quota', name, labels, hardOf(d, quota.quota));
    for (const project of await d.kube.list(KINDS.project, name)) {
      const projectName = project.metadata.name ?? '';
      const backing = String(project.status?.namespace ?? `${name}-${projectName}`);
      if (!(await d.kube.get(KINDS.namespace, backing))) continue;
      const cap = quota.projectCaps[projectName];
      if (cap && Object.keys(cap).length > 0) await upsertHard(d, KINDS.resourceQuota, PROJECT_CAP_QUOTA, backing, labels, hardOf(d, cap));
      else await d.kube.delete(KINDS.resourceQuota, PROJECT_CAP_QUOTA, backing);
    }
    return DONE;
  });
}

function hardOf(d: Driver, limits: Partial<QuotaSpec['quota']>): Record<string, string> {
  const hard: Record<string, string> = {};
  if (limits.vcpu !== undefined) hard['requests.cpu'] = String(limits.vcpu);
  if (limits.memory_gib !== undefined) hard['requests.memory'] = GIB(limits.memory_gib);
  if (limits.storage_gib !== undefined) hard['requests.storage'] = GIB(limits.storage_gib);
  for (const [profile, count] of Object.entries(limits.gpus ?? {})) hard[`requests.${d.config.gpuProfiles[profile]}`] = String(count);
  return hard;
}

/** Creates the quota object, or sets its `spec.hard` to exactly `hard` (a merge patch drops the keys no longer wanted). */
async function upsertHard(
  d: Driver,
  kind: typeof KINDS.hrq | typeof KINDS.resourceQuota,
  name: string,
  namespace: string,
  labels: Record<string, string>,
  hard: Record<string, string>,
): Promise<void> {
  const { object, created } = await d.kube.createOrGet({ ...kind, metadata: { name, namespace, labels }, spec: { hard } });
  if (created) return;
  const current = ((object.spec?.hard as Record<string, string> | undefined) ?? {}) as Record<string, string | null>;
  const patch: Record<string, string | null> = { ...hard };
  for (const key of Object.keys(current)) if (!(key in hard)) patch[key] = null;
  if (Object.entries(patch).some(([key, value]) => current[key] !== value))
    await d.kube.mergePatch(kind, name, namespace, { spec: { hard: patch } });
}
