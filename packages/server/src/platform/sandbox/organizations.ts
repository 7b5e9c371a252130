import { type Kysely, sql } from 'kysely';
import { precompile } from '../../infra/db/precompiled.ts';
import {
  type CustomerProgress,
  type CustomerSpec,
  NO_WORKLOADS,
  type OrganizationRef,
  type OrganizationSpec,
  type PlatformContext,
  type Progress,
  type QuotaSpec,
} from '../platform.ts';
import { userAttrs, userName } from './identity.ts';
import { FAST_ATTEMPTS } from './projects.ts';
import {
  failureInjectable,
  forget,
  insertObject,
  latency,
  markGone,
  object,
  progressOf,
  type Sandbox,
  scopeOf,
  startOf,
  tombstone,
} from './state.ts';
import type { SandboxScope, SandboxTables } from './tables.ts';
import { provisionWhole, type WholeCustomerRow } from './whole-customer.ts';
import { accrue } from './workloads.ts';

/** An organization's plan and quota merged into its attributes (a quota applied). */
const mergeOrganizationAttrs = precompile((db: Kysely<SandboxTables>, a: { scope: SandboxScope; name: string; attrs: string }) =>
  db
    .updateTable('sandbox_objects')
    .set({ attrs: sql`attrs || ${a.attrs}::jsonb` })
    .where('platform_scope', '=', a.scope)
    .where('kind', '=', 'organization')
    .where('name', '=', a.name),
);

export async function ensureOrganization(s: Sandbox, ctx: PlatformContext, org: OrganizationSpec): Promise<Progress> {
  await latency(s, ctx);
  const make = () =>
    insertObject(s, ctx, 'organization', org.organization, org.organization, s.customerMs, 'customer.create', {
      display_name: org.displayName,
      plan_id: org.planId,
    });
  let row = failureInjectable(ctx, 'customer.create') ? await object(s, ctx, 'organization', org.organization) : await make();
  // What is left of a torn-down organization of this name does not stand in a new one's way.
  if (row?.gone_at && row.gone_at <= ctx.now) {
    await forget(s, ctx, org.organization);
    row = undefined;
  }
  return progressOf(row ?? (await make()), ctx.now);
}

export async function deleteOrganization(s: Sandbox, ctx: PlatformContext, org: OrganizationRef): Promise<Progress> {
  await latency(s, ctx);
  // Teardown takes its time even for an organization whose creation had not started yet.
  const row = (await object(s, ctx, 'organization', org.organization)) ?? (await tombstone(s, ctx, org.organization));
  const goneAt = row.gone_at ?? (await markGone(s, ctx, 'organization', org.organization, s.teardownMs));
  if (goneAt > ctx.now) return { state: 'in_progress', until: goneAt };
  const scope = scopeOf(ctx);
  await s.db.transaction().execute(async (trx) => {
    await trx
      .deleteFrom('sandbox_address_ranges')
      .where('partner_id', '=', ctx.partnerId)
      .where('mode', '=', ctx.mode)
      .where('namespace', 'in', (q) =>
        q
          .selectFrom('sandbox_objects')
          .select('name')
          .where('platform_scope', '=', scope)
          .where('kind', '=', 'project')
          .where('organization', '=', org.organization),
      )
      .execute();
    // Everything in it goes; the organization itself stays as a tombstone, so a repeated teardown is done.
    await trx
      .deleteFrom('sandbox_objects')
      .where('platform_scope', '=', scope)
      .where('organization', '=', org.organization)
      .where('kind', '<>', 'organization')
      .execute();
    await trx.deleteFrom('sandbox_workloads').where('platform_scope', '=', scope).where('organization', '=', org.organization).execute();
    await trx.deleteFrom('sandbox_vms').where('platform_scope', '=', scope).where('organization', '=', org.organization).execute();
    await accrue(trx, ctx, org.organization, NO_WORKLOADS);
  });
  return { state: 'done' };
}

export async function applyQuota(s: Sandbox, ctx: PlatformContext, org: OrganizationRef, quota: QuotaSpec): Promise<Progress> {
  await latency(s, ctx);
  const updated = await mergeOrganizationAttrs(s.db, {
    scope: scopeOf(ctx),
    name: org.organization,
    attrs: JSON.stringify({ plan_id: quota.planId, quota: quota.quota, project_caps: quota.projectCaps }),
  });
  if ((updated.numAffectedRows ?? 0n) === 0n)
    return { state: 'failed', code: 'UPSTREAM_NOT_FOUND', message: `Organization ${org.organization} does not exist.` };
  return { state: 'done' };
}

/**
 * A new customer in one statement a look (`provisionWhole`) where the calls one by one
 * take five: not where a failure may be injected (test mode's `customer.create`), and not where the
 * statement stops short of what the calls decide (an organization going or failed, a range the
 * allocator has to look harder for, a project that failed): undefined, and the calls take over.
 */
export async function provisionCustomer(s: Sandbox, ctx: PlatformContext, customer: CustomerSpec): Promise<CustomerProgress | undefined> {
  if (failureInjectable(ctx, 'customer.create')) return undefined;
  await latency(s, ctx);
  const { organization: org, quota, owner, project } = customer;
  const quotaAttrs = { plan_id: quota.planId, quota: quota.quota, project_caps: quota.projectCaps };
  const look = () =>
    provisionWhole(s.db, {
      scope: scopeOf(ctx),
      now: ctx.now,
      organization: org.organization,
      organizationReadyAt: new Date(startOf(ctx) + s.customerMs),
      organizationAttrs: JSON.stringify({ display_name: org.displayName, ...quotaAttrs }),
      quotaAttrs: JSON.stringify(quotaAttrs),
      user: userName(owner),
      userAttrs: JSON.stringify(userAttrs(owner)),
      partnerId: ctx.partnerId,
      mode: ctx.mode,
      namespace: project.namespace,
      ranges: s.ranges,
      projectReadyAt: new Date(startOf(ctx) + s.projectMs),
      project: project.project,
    });
  // A range another allocator took at the same moment: each clash is a range handed out, so asking
  // again moves up (as `reserveAddressRange`'s lock-free path does).
  const clashed = (row: WholeCustomerRow | undefined) =>
    row?.organization_ready_at && row.organization_ready_at <= ctx.now && !row.cidr && Number(row.top) < s.ranges;
  let [row] = (await look()).rows;
  for (let attempt = 1; attempt < FAST_ATTEMPTS && clashed(row); attempt++) [row] = (await look()).rows;
  if (!row?.organization_ready_at) return undefined;
  if (row.organization_ready_at > ctx.now) return { state: 'in_progress', until: row.organization_ready_at, cidr: null };
  if (!row.cidr || !row.project_ready_at || row.project_failed) return undefined;
  if (row.project_ready_at > ctx.now) return { state: 'in_progress', until: row.project_ready_at, cidr: row.cidr };
  return { state: 'done', cidr: row.cidr };
}

/** Sandbox only (conformance and tests): the plan and quota last applied to an organization. */
export async function appliedQuota(
  s: Sandbox,
  ctx: PlatformContext,
  org: OrganizationRef,
): Promise<Omit<QuotaSpec, 'planId'> & { planId: string | undefined }> {
  const row = await object(s, ctx, 'organization', org.organization);
  const attrs = (row?.attrs ?? {}) as { plan_id?: string; quota?: QuotaSpec['quota']; project_caps?: QuotaSpec['projectCaps'] };
  return {
    planId: attrs.plan_id,
    quota: attrs.quota ?? { vcpu: 0, memory_gib: 0, storage_gib: 0, gpus: {} },
    projectCaps: attrs.project_caps ?? {},
  };
}
