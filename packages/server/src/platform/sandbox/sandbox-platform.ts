import { setTimeout as delay } from 'node:timers/promises';
import { type Kysely, type Selectable, sql } from 'kysely';
import { precompile } from '../../infra/db/precompiled.ts';
import { failureMessage, isFailureCode } from '../failures.ts';
import {
  type AddressRange,
  type ConsoleLoginGrant,
  type CustomerProgress,
  type CustomerSpec,
  NO_WORKLOADS,
  type OrganizationRef,
  type OrganizationSpec,
  type Platform,
  type PlatformContext,
  type PlatformVm,
  type Progress,
  type ProjectRef,
  type ProjectSpec,
  type QuotaSpec,
  type UsageSubject,
  type UsageTotals,
  type UserRef,
  type UserSpec,
  type VmCreation,
  type Workloads,
} from '../platform.ts';
import { rangeCidr } from './ranges.ts';
import { createSandboxVm, heldBy } from './sandbox-vms.ts';
import type { SandboxObjectKind, SandboxScope, SandboxTables, SandboxUsageTable, SandboxWorkloadsTable } from './tables.ts';
import { provisionWhole, type WholeCustomerRow } from './whole-customer.ts';

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
/** A provisioning step that never finishes (an injected PROVISIONING_TIMEOUT): the engine times it out. */
const NEVER = new Date('9999-12-31T00:00:00Z');

export { DATABASE_SIZE, VM_SIZE } from './sandbox-vms.ts';

/** A test-mode failure injected through `POST /test-helpers/failures`. */
export interface FailureInjection {
  type: 'customer.create' | 'project.create' | 'gpu_usage';
  code: string | null;
  message: string | null;
  customerId: string | null;
  project: string | null;
  count: number;
}

interface ObjectRow {
  ready_at: Date;
  failure_code: string | null;
  failure_message: string | null;
  gone_at: Date | null;
  attrs: unknown;
}

/** What a look needs of an object. */
const OBJECT_COLUMNS = ['ready_at', 'failure_code', 'failure_message', 'gone_at', 'attrs'] as const;

/** Where the sandbox keeps a caller's names: one live platform for everyone, a sandbox of its own for each partner's test mode. */
const scopeOf = (ctx: PlatformContext): SandboxScope => (ctx.mode === 'live' ? 'live' : `test:${ctx.partnerId}`);

/**
 * A new object, or the one already there (a repeat after a crash finds the first insert's object: the
 * same outcome, never a second failure): one statement, compiled once (decision 233).
 */
const insertObject = precompile(
  (
    db: Kysely<SandboxTables>,
    a: {
      scope: SandboxScope;
      kind: SandboxObjectKind;
      name: string;
      organization: string;
      readyAt: Date;
      failureCode: string | null;
      failureMessage: string | null;
      attrs: string;
    },
  ) =>
    db
      .with('added', (qc) =>
        qc
          .insertInto('sandbox_objects')
          .values({
            platform_scope: a.scope,
            kind: a.kind,
            name: a.name,
            organization: a.organization,
            ready_at: a.readyAt,
            failure_code: a.failureCode,
            failure_message: a.failureMessage,
            gone_at: null,
            attrs: a.attrs,
          })
          .onConflict((oc) => oc.columns(['platform_scope', 'kind', 'name']).doNothing())
          .returning(OBJECT_COLUMNS),
      )
      .selectFrom('added')
      .select(OBJECT_COLUMNS)
      .unionAll((eb) =>
        eb
          .selectFrom('sandbox_objects')
          .select(OBJECT_COLUMNS)
          .where('platform_scope', '=', a.scope)
          .where('kind', '=', a.kind)
          .where('name', '=', a.name)
          .where(({ not, exists, selectFrom }) => not(exists(selectFrom('added').select('ready_at')))),
      ),
);

/** An organization's plan and quota merged into its attributes (a quota applied). */
const mergeOrganizationAttrs = precompile((db: Kysely<SandboxTables>, a: { scope: SandboxScope; name: string; attrs: string }) =>
  db
    .updateTable('sandbox_objects')
    .set({ attrs: sql`attrs || ${a.attrs}::jsonb` })
    .where('platform_scope', '=', a.scope)
    .where('kind', '=', 'organization')
    .where('name', '=', a.name),
);

/**
 * The simulated platform of CONTRACT §8, kept in tables of its own: its organizations, projects
 * and users (`sandbox_objects`), address ranges, workloads, usage and injected failures. Objects
 * take realistic time to become ready or gone, measured on the caller's mode clock, so grace
 * periods, teardown and timeouts follow a test clock that is advanced. It writes through its own
 * short transactions, like a remote platform would keep its own state: never the caller's.
 */
export class SandboxPlatform implements Platform {
  readonly name = 'sandbox' as const;
  readonly #db: Kysely<SandboxTables>;
  readonly #customerMs: number;
  readonly #projectMs: number;
  readonly #teardownMs: number;
  readonly #ranges: number;
  readonly #callMs: number;

  constructor(options: SandboxOptions) {
    this.#db = options.db;
    this.#customerMs = options.delayMs;
    this.#projectMs = Math.round((options.delayMs * 2) / 3);
    this.#teardownMs = options.delayMs * 20;
    this.#ranges = options.addressRanges ?? DEFAULT_ADDRESS_RANGES;
    this.#callMs = options.callMs ?? 0;
  }

  async ensureOrganization(ctx: PlatformContext, org: OrganizationSpec): Promise<Progress> {
    await this.#latency(ctx);
    const make = () =>
      this.#insertObject(ctx, 'organization', org.organization, org.organization, this.#customerMs, 'customer.create', {
        display_name: org.displayName,
        plan_id: org.planId,
      });
    let row = this.#failureInjectable(ctx, 'customer.create') ? await this.#object(ctx, 'organization', org.organization) : await make();
    // What is left of a torn-down organization of this name does not stand in a new one's way.
    if (row?.gone_at && row.gone_at <= ctx.now) {
      await this.#forget(ctx, org.organization);
      row = undefined;
    }
    return progressOf(row ?? (await make()), ctx.now);
  }

  async deleteOrganization(ctx: PlatformContext, org: OrganizationRef): Promise<Progress> {
    await this.#latency(ctx);
    // Teardown takes its time even for an organization whose creation had not started yet.
    const row = (await this.#object(ctx, 'organization', org.organization)) ?? (await this.#tombstone(ctx, org.organization));
    const goneAt = row.gone_at ?? (await this.#markGone(ctx, 'organization', org.organization, this.#teardownMs));
    if (goneAt > ctx.now) return { state: 'in_progress', until: goneAt };
    const scope = scopeOf(ctx);
    await this.#db.transaction().execute(async (trx) => {
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

  async reserveAddressRange(ctx: PlatformContext, project: ProjectRef): Promise<AddressRange> {
    await this.#latency(ctx);
    const { partnerId, mode } = ctx;
    // The common case in one statement, without a lock: the namespace's range when it has one, else the
    // range above the highest taken. Allocators running together pick the same top and all but one
    // clash; each clash is a range handed out (the insert waits for the one that took it), so asking
    // again moves up. A full top (or clashes beyond FAST_ATTEMPTS) takes the locked path below, which
    // also finds ranges released under the top.
    for (let attempt = 0; attempt < FAST_ATTEMPTS; attempt++) {
      const next = await sql<{ cidr: string | null; top: number }>`
        with mine as (
          select cidr from sandbox_address_ranges where partner_id = ${partnerId} and mode = ${mode} and namespace = ${project.namespace}
        ), top as (
          select coalesce(max(idx) + 1, 0) as idx from sandbox_address_ranges where partner_id = ${partnerId} and mode = ${mode}
        ), made as (
          insert into sandbox_address_ranges (partner_id, mode, idx, cidr, namespace)
          select ${partnerId}, ${mode}, top.idx, ${rangeCidr(sql.ref('top.idx'))}, ${project.namespace}
          from top where top.idx < ${this.#ranges} and not exists (select 1 from mine)
          on conflict do nothing
          returning cidr
        )
        select coalesce((select cidr from mine), (select cidr from made)) as cidr, (select idx from top) as top`.execute(this.#db);
      const row = next.rows[0];
      if (row?.cidr) return { state: 'done', cidr: row.cidr };
      if (row && Number(row.top) >= this.#ranges) break;
    }
    // The one-statement path takes no lock: a range it took after the locked path's read is a clash,
    // and the locked path reads again (each clash is a range handed out, so this ends).
    let cidr: string | undefined | typeof CLASH = CLASH;
    for (let attempt = 0; cidr === CLASH && attempt <= this.#ranges; attempt++) cidr = await this.#reserveLocked(ctx, project);
    if (cidr === CLASH) throw new Error('address range allocation kept clashing');
    if (!cidr) return { state: 'failed', code: 'NO_ADDRESS_SPACE', message: failureMessage('NO_ADDRESS_SPACE') };
    return { state: 'done', cidr };
  }

  /** Under the partner's allocator lock: the namespace's range, the one above the top, or one released below it. */
  async #reserveLocked(ctx: PlatformContext, project: ProjectRef): Promise<string | undefined | typeof CLASH> {
    const { partnerId, mode } = ctx;
    return this.#db.transaction().execute(async (trx) => {
      // One allocator per partner and mode at a time (the lock ends with this transaction).
      await sql`select pg_advisory_xact_lock(hashtext(${`sandbox-ranges:${partnerId}:${mode}`}))`.execute(trx);
      // The namespace's range if it has one, and the highest range taken, in one read.
      const top = await sql<{ mine: string | null; max: number | null }>`
        select max(case when namespace = ${project.namespace} then cidr end) as mine, max(idx) as max
        from sandbox_address_ranges where partner_id = ${partnerId} and mode = ${mode}`.execute(trx);
      const found = top.rows[0];
      if (found?.mine) return found.mine;
      let idx: number | undefined = found?.max == null ? 0 : Number(found.max) + 1;
      if (idx >= this.#ranges) {
        // The top is taken: look for a range released below it.
        const gap = await sql<{ i: number }>`
          select s.i from generate_series(0, ${this.#ranges - 1}) as s(i)
          where not exists (select 1 from sandbox_address_ranges r where r.partner_id = ${partnerId} and r.mode = ${mode} and r.idx = s.i)
          order by s.i limit 1`.execute(trx);
        idx = gap.rows[0]?.i;
      }
      if (idx === undefined) return undefined;
      const inserted = await trx
        .insertInto('sandbox_address_ranges')
        .values({ partner_id: partnerId, mode, idx, cidr: rangeCidr(sql.val(idx)), namespace: project.namespace })
        .onConflict((oc) => oc.doNothing())
        .returning('cidr')
        .executeTakeFirst();
      return inserted?.cidr ?? CLASH;
    });
  }

  async ensureProject(ctx: PlatformContext, project: ProjectSpec): Promise<Progress> {
    await this.#latency(ctx);
    const make = () =>
      this.#insertObject(ctx, 'project', project.namespace, project.organization, this.#projectMs, 'project.create', {
        project: project.project,
        cidr: project.cidr,
      });
    const row = this.#failureInjectable(ctx, 'project.create')
      ? ((await this.#object(ctx, 'project', project.namespace)) ?? (await make()))
      : await make();
    return progressOf(row, ctx.now);
  }

  async deleteProject(ctx: PlatformContext, project: ProjectRef): Promise<Progress> {
    await this.#latency(ctx);
    const row = await this.#object(ctx, 'project', project.namespace);
    if (row) {
      const goneAt = row.gone_at ?? (await this.#markGone(ctx, 'project', project.namespace, this.#projectMs));
      if (goneAt > ctx.now) return { state: 'in_progress', until: goneAt };
    }
    await this.#db.transaction().execute(async (trx) => {
      await trx
        .deleteFrom('sandbox_address_ranges')
        .where('partner_id', '=', ctx.partnerId)
        .where('mode', '=', ctx.mode)
        .where('namespace', '=', project.namespace)
        .execute();
      await trx
        .deleteFrom('sandbox_objects')
        .where('platform_scope', '=', scopeOf(ctx))
        .where('kind', '=', 'project')
        .where('name', '=', project.namespace)
        .execute();
    });
    return { state: 'done' };
  }

  async ensureUser(ctx: PlatformContext, user: UserSpec): Promise<Progress> {
    await this.#latency(ctx);
    // A user lives in the organization's realm: none before the organization is ready. One statement
    // reads the organization and adds the user only if it is ready (a repeat finds the user there).
    const scope = scopeOf(ctx);
    const attrs = JSON.stringify(userAttrs(user));
    const { rows } = await sql<{ ready_at: Date; gone_at: Date | null }>`
      with org as (
        select ready_at, gone_at from sandbox_objects
        where platform_scope = ${scope} and kind = 'organization' and name = ${user.organization}),
      added as (
        insert into sandbox_objects (platform_scope, kind, name, organization, ready_at, gone_at, attrs)
        select ${scope}, 'user', ${userName(user)}, ${user.organization}, ${ctx.now}::timestamptz, null, ${attrs}::jsonb
        from org where gone_at is null and ready_at <= ${ctx.now}::timestamptz
        on conflict (platform_scope, kind, name) do nothing)
      select ready_at, gone_at from org`.execute(this.#db);
    const org = rows[0];
    if (!org || org.gone_at)
      return { state: 'failed', code: 'UPSTREAM_NOT_FOUND', message: `Organization ${user.organization} does not exist.` };
    if (org.ready_at > ctx.now) return { state: 'in_progress', until: org.ready_at };
    return { state: 'done' };
  }

  async deleteUser(ctx: PlatformContext, user: UserRef): Promise<Progress> {
    await this.#latency(ctx);
    await this.#db
      .deleteFrom('sandbox_objects')
      .where('platform_scope', '=', scopeOf(ctx))
      .where('kind', '=', 'user')
      .where('name', '=', userName(user))
      .execute();
    return { state: 'done' };
  }

  async applyQuota(ctx: PlatformContext, org: OrganizationRef, quota: QuotaSpec): Promise<Progress> {
    await this.#latency(ctx);
    const updated = await mergeOrganizationAttrs(this.#db, {
      scope: scopeOf(ctx),
      name: org.organization,
      attrs: JSON.stringify({ plan_id: quota.planId, quota: quota.quota, project_caps: quota.projectCaps }),
    });
    if ((updated.numAffectedRows ?? 0n) === 0n)
      return { state: 'failed', code: 'UPSTREAM_NOT_FOUND', message: `Organization ${org.organization} does not exist.` };
    return { state: 'done' };
  }

  /**
   * A new customer in one statement a look (`provisionWhole`, decision 260) where the calls one by one
   * take five: not where a failure may be injected (test mode's `customer.create`), and not where the
   * statement stops short of what the calls decide (an organization going or failed, a range the
   * allocator has to look harder for, a project that failed): undefined, and the calls take over.
   */
  async provisionCustomer(ctx: PlatformContext, customer: CustomerSpec): Promise<CustomerProgress | undefined> {
    if (this.#failureInjectable(ctx, 'customer.create')) return undefined;
    await this.#latency(ctx);
    const { organization: org, quota, owner, project } = customer;
    const quotaAttrs = { plan_id: quota.planId, quota: quota.quota, project_caps: quota.projectCaps };
    const look = () =>
      provisionWhole(this.#db, {
        scope: scopeOf(ctx),
        now: ctx.now,
        organization: org.organization,
        organizationReadyAt: new Date(startOf(ctx) + this.#customerMs),
        organizationAttrs: JSON.stringify({ display_name: org.displayName, ...quotaAttrs }),
        quotaAttrs: JSON.stringify(quotaAttrs),
        user: userName(owner),
        userAttrs: JSON.stringify(userAttrs(owner)),
        partnerId: ctx.partnerId,
        mode: ctx.mode,
        namespace: project.namespace,
        ranges: this.#ranges,
        projectReadyAt: new Date(startOf(ctx) + this.#projectMs),
        project: project.project,
      });
    // A range another allocator took at the same moment: each clash is a range handed out, so asking
    // again moves up (as `reserveAddressRange`'s lock-free path does).
    const clashed = (row: WholeCustomerRow | undefined) =>
      row?.organization_ready_at && row.organization_ready_at <= ctx.now && !row.cidr && Number(row.top) < this.#ranges;
    let [row] = (await look()).rows;
    for (let attempt = 1; attempt < FAST_ATTEMPTS && clashed(row); attempt++) [row] = (await look()).rows;
    if (!row?.organization_ready_at) return undefined;
    if (row.organization_ready_at > ctx.now) return { state: 'in_progress', until: row.organization_ready_at, cidr: null };
    if (!row.cidr || !row.project_ready_at || row.project_failed) return undefined;
    if (row.project_ready_at > ctx.now) return { state: 'in_progress', until: row.project_ready_at, cidr: row.cidr };
    return { state: 'done', cidr: row.cidr };
  }

  /** Sandbox only (conformance and tests): the plan and quota last applied to an organization. */
  async appliedQuota(ctx: PlatformContext, org: OrganizationRef): Promise<Omit<QuotaSpec, 'planId'> & { planId: string | undefined }> {
    const row = await this.#object(ctx, 'organization', org.organization);
    const attrs = (row?.attrs ?? {}) as { plan_id?: string; quota?: QuotaSpec['quota']; project_caps?: QuotaSpec['projectCaps'] };
    return {
      planId: attrs.plan_id,
      quota: attrs.quota ?? { vcpu: 0, memory_gib: 0, storage_gib: 0, gpus: {} },
      projectCaps: attrs.project_caps ?? {},
    };
  }

  /** Sandbox only (test helper): the identity provider's pending actions for a user. */
  async setRequiredActions(ctx: PlatformContext, user: UserRef, actions: string[]): Promise<void> {
    await this.#db
      .updateTable('sandbox_objects')
      .set({ attrs: sql`jsonb_set(attrs, '{required_actions}', ${JSON.stringify(actions)}::jsonb)` })
      .where('platform_scope', '=', scopeOf(ctx))
      .where('kind', '=', 'user')
      .where('name', '=', userName(user))
      .execute();
  }

  async prepareConsoleLogin(ctx: PlatformContext, user: UserRef): Promise<ConsoleLoginGrant> {
    await this.#latency(ctx);
    const row = await this.#object(ctx, 'user', userName(user));
    const actions = ((row?.attrs ?? {}) as { required_actions?: string[] }).required_actions ?? [];
    // The sandbox has no identity provider of its own: Tenantry mints the one-time link.
    return actions.length > 0 ? { state: 'action_required', actions } : { state: 'ready' };
  }

  async listWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    await this.#latency(ctx);
    return readWorkloads(this.#db, ctx, org.organization);
  }

  async stopWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    await this.#latency(ctx);
    return this.#setRunning(ctx, org.organization, false);
  }

  async startWorkloads(ctx: PlatformContext, org: OrganizationRef): Promise<Workloads> {
    await this.#latency(ctx);
    return this.#setRunning(ctx, org.organization, true);
  }

  /** Sandbox only (test helper): replaces the customer's live workloads. */
  async setWorkloads(ctx: PlatformContext, org: OrganizationRef, workloads: Workloads): Promise<Workloads> {
    const values = { vms: workloads.vms, databases: workloads.databases, gpus: JSON.stringify(workloads.gpus), running: workloads.running };
    await this.#db.transaction().execute(async (trx) => {
      await trx
        .insertInto('sandbox_workloads')
        .values({ platform_scope: scopeOf(ctx), organization: org.organization, ...values })
        .onConflict((oc) => oc.columns(['platform_scope', 'organization']).doUpdateSet(values))
        .execute();
      await accrue(trx, ctx, org.organization, workloads);
    });
    return workloads;
  }

  async createVm(ctx: PlatformContext, vm: PlatformVm): Promise<VmCreation> {
    await this.#latency(ctx);
    return createSandboxVm(
      this.#db,
      ctx,
      scopeOf(ctx),
      vm,
      (trx) => readWorkloads(trx, ctx, vm.organization),
      (trx, workloads) => accrue(trx, ctx, vm.organization, workloads),
    );
  }

  async gpuUsage(ctx: PlatformContext, org: OrganizationRef): Promise<Record<string, number> | undefined> {
    await this.#latency(ctx);
    // Test mode can make the check fail (CONTRACT §5, failures of type gpu_usage).
    if (ctx.mode === 'test' && (await this.#takeFailure(ctx, 'gpu_usage'))) return undefined;
    const workloads = await readWorkloads(this.#db, ctx, org.organization);
    return workloads.running ? workloads.gpus : {};
  }

  async usage(ctx: PlatformContext, customers: UsageSubject[], from: Date, to: Date): Promise<Map<string, UsageTotals>> {
    await this.#latency(ctx);
    const totals = new Map<string, UsageTotals>(
      customers.map((c) => [c.customerId, { vcpu_hours: 0, memory_gib_hours: 0, storage_gib_hours: 0, gpu_hours: {} }]),
    );
    if (customers.length === 0) return totals;
    // A deleted customer and a later one of the same id share an organization name: each span goes to
    // every subject of its organization, cut to that subject's own life.
    const byOrganization = new Map<string, UsageSubject[]>();
    for (const c of customers) byOrganization.set(c.organization, [...(byOrganization.get(c.organization) ?? []), c]);
    const spans = await this.#db
      .selectFrom('sandbox_usage')
      .selectAll()
      .where('platform_scope', '=', scopeOf(ctx))
      .where('organization', 'in', [...byOrganization.keys()])
      .where('started_at', '<', to)
      .where((eb) => eb.or([eb('ended_at', 'is', null), eb('ended_at', '>', from)]))
      .execute();
    for (const span of spans) {
      for (const subject of byOrganization.get(span.organization) ?? []) this.#addSpan(totals, span, subject, from, to, ctx.now);
    }
    return totals;
  }

  #addSpan(
    totals: Map<string, UsageTotals>,
    span: Selectable<SandboxUsageTable>,
    subject: UsageSubject,
    from: Date,
    to: Date,
    now: Date,
  ): void {
    const start = Math.max(span.started_at.getTime(), from.getTime(), subject.since.getTime());
    const end = Math.min(
      (span.ended_at ?? now).getTime(),
      to.getTime(),
      now.getTime(),
      subject.until?.getTime() ?? Number.POSITIVE_INFINITY,
    );
    if (end <= start) return;
    const hours = (end - start) / 3_600_000;
    const total = totals.get(subject.customerId);
    if (!total) return;
    total.vcpu_hours += span.vcpu * hours;
    total.memory_gib_hours += span.memory_gib * hours;
    total.storage_gib_hours += span.storage_gib * hours;
    for (const [profile, n] of Object.entries(span.gpus)) total.gpu_hours[profile] = (total.gpu_hours[profile] ?? 0) + n * hours;
  }

  /** Sandbox only (test helper): the next matching provisioning steps fail. */
  async injectFailure(ctx: PlatformContext, failure: FailureInjection): Promise<void> {
    await this.#db
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

  async #latency(ctx: PlatformContext): Promise<void> {
    if (this.#callMs > 0) await delay(this.#callMs, undefined, ctx.signal ? { signal: ctx.signal } : {});
  }

  async #setRunning(ctx: PlatformContext, organization: string, running: boolean): Promise<Workloads> {
    // The common case in one statement (decision 254): a stop, or a start of an organization that runs
    // nothing, whose open usage span ends and none begins. The update's own condition is checked on
    // the row as it is when the update locks it. A start of something (a new span) takes the transaction.
    const scope = scopeOf(ctx);
    const { rows } = await sql<{ done: boolean } & (WorkloadsRow | { [K in keyof WorkloadsRow]: null })>`
      with changed as (
        update sandbox_workloads set running = ${running}
        where platform_scope = ${scope} and organization = ${organization}
          and (not ${running}::boolean or (cardinality(vms) = 0 and cardinality(databases) = 0 and gpus = '{}'::jsonb))
        returning vms, databases, gpus, running),
      quiet as (
        select exists (select 1 from changed)
          or not exists (select 1 from sandbox_workloads where platform_scope = ${scope} and organization = ${organization}) as yes),
      ended as (
        update sandbox_usage set ended_at = ${ctx.now}::timestamptz
        where platform_scope = ${scope} and organization = ${organization} and ended_at is null and (select yes from quiet))
      select (select yes from quiet) as done, changed.* from (select 1) as one left join changed on true`.execute(this.#db);
    const row = rows[0];
    if (row?.done) return toWorkloads(row.running === null ? undefined : row);
    return this.#db.transaction().execute(async (trx) => {
      await trx
        .updateTable('sandbox_workloads')
        .set({ running })
        .where('platform_scope', '=', scopeOf(ctx))
        .where('organization', '=', organization)
        .execute();
      const workloads = await readWorkloads(trx, ctx, organization);
      await accrue(trx, ctx, organization, workloads);
      return workloads;
    });
  }

  /**
   * Whether a failure may have been injected for this step (test mode, inside that operation). There
   * an object is read before it is inserted, so a repeated look finds the first one's object and never
   * takes a second failure; elsewhere the insert comes first and answers the object either way.
   */
  #failureInjectable(ctx: PlatformContext, step: 'customer.create' | 'project.create'): boolean {
    return ctx.mode === 'test' && ctx.operation?.type === step;
  }

  async #object(ctx: PlatformContext, kind: SandboxObjectKind, name: string): Promise<ObjectRow | undefined> {
    return this.#db
      .selectFrom('sandbox_objects')
      .select(OBJECT_COLUMNS)
      .where('platform_scope', '=', scopeOf(ctx))
      .where('kind', '=', kind)
      .where('name', '=', name)
      .executeTakeFirst();
  }

  /** Creates an object that becomes ready after `takesMs`, or fails then if a matching failure was injected. */
  async #insertObject(
    ctx: PlatformContext,
    kind: SandboxObjectKind,
    name: string,
    organization: string,
    takesMs: number,
    failureType: 'customer.create' | 'project.create',
    attrs: Record<string, unknown>,
  ): Promise<ObjectRow> {
    // Failures are injected through test helpers, so only test mode looks for them.
    const failure = this.#failureInjectable(ctx, failureType) ? await this.#takeFailure(ctx, failureType) : undefined;
    const timesOut = failure?.code === 'PROVISIONING_TIMEOUT';
    const row: ObjectRow = {
      ready_at: timesOut ? NEVER : new Date(startOf(ctx) + takesMs),
      failure_code: timesOut ? null : (failure?.code ?? null),
      failure_message: timesOut ? null : (failure?.message ?? null),
      gone_at: null,
      attrs,
    };
    // One statement: the new object, or the one already there (a repeat after a crash finds the first
    // insert's object: the same outcome, never a second failure).
    const [found] = (
      await insertObject(this.#db, {
        scope: scopeOf(ctx),
        kind,
        name,
        organization,
        readyAt: row.ready_at,
        failureCode: row.failure_code,
        failureMessage: row.failure_message,
        attrs: JSON.stringify(attrs),
      })
    ).rows;
    // Another look inserting it at the same moment: that insert was not there when this one began.
    return found ?? (await this.#object(ctx, kind, name)) ?? row;
  }

  async #takeFailure(ctx: PlatformContext, type: string): Promise<{ code: string; message: string | null } | undefined> {
    const target = ctx.operation;
    const result = await sql<{ code: string; message: string | null }>`
      update sandbox_failures set remaining = remaining - 1
      where id = (
        select id from sandbox_failures
        where platform_scope = ${scopeOf(ctx)} and type = ${type} and remaining > 0
          and (customer_id is null or customer_id = ${target?.customerId ?? null})
          and (project is null or project = ${target?.project ?? null})
        order by id limit 1 for update)
      returning code, message`.execute(this.#db);
    return result.rows[0];
  }

  async #tombstone(ctx: PlatformContext, organization: string): Promise<ObjectRow> {
    const row: ObjectRow = { ready_at: ctx.now, failure_code: null, failure_message: null, gone_at: null, attrs: {} };
    await this.#db
      .insertInto('sandbox_objects')
      .values({ platform_scope: scopeOf(ctx), kind: 'organization', name: organization, organization, ...row, attrs: '{}' })
      .onConflict((oc) => oc.columns(['platform_scope', 'kind', 'name']).doNothing())
      .execute();
    return (await this.#object(ctx, 'organization', organization)) ?? row;
  }

  async #forget(ctx: PlatformContext, organization: string): Promise<void> {
    await this.#db
      .deleteFrom('sandbox_objects')
      .where('platform_scope', '=', scopeOf(ctx))
      .where('kind', '=', 'organization')
      .where('name', '=', organization)
      .execute();
  }

  async #markGone(ctx: PlatformContext, kind: SandboxObjectKind, name: string, takesMs: number): Promise<Date> {
    const goneAt = new Date(startOf(ctx) + takesMs);
    // The first mark wins: a repeat keeps the teardown's original end.
    const row = await this.#db
      .updateTable('sandbox_objects')
      .set({ gone_at: sql`coalesce(gone_at, ${goneAt}::timestamptz)` })
      .where('platform_scope', '=', scopeOf(ctx))
      .where('kind', '=', kind)
      .where('name', '=', name)
      .returning('gone_at')
      .executeTakeFirst();
    return row?.gone_at ?? goneAt;
  }
}

/** The organization's workloads (none recorded: nothing, and running). */
async function readWorkloads(db: Kysely<SandboxTables>, ctx: PlatformContext, organization: string): Promise<Workloads> {
  const row = await db
    .selectFrom('sandbox_workloads')
    .select(['vms', 'databases', 'gpus', 'running'])
    .where('platform_scope', '=', scopeOf(ctx))
    .where('organization', '=', organization)
    .executeTakeFirst();
  return toWorkloads(row);
}

type WorkloadsRow = Pick<SandboxWorkloadsTable, 'vms' | 'databases' | 'gpus' | 'running'>;

/** An organization's workloads from its row (none recorded: nothing, and running). */
function toWorkloads(row: WorkloadsRow | undefined): Workloads {
  if (!row) return { vms: [], databases: [], gpus: {}, running: true };
  return { vms: row.vms, databases: row.databases, gpus: row.gpus as Record<string, number>, running: row.running };
}

/**
 * Usage accrues while workloads run: the open span of the organization ends now, and a new one starts
 * with what now runs (VM_SIZE per VM, DATABASE_SIZE per database, GPUs as granted to workloads).
 */
async function accrue(db: Kysely<SandboxTables>, ctx: PlatformContext, organization: string, workloads: Workloads): Promise<void> {
  const scope = scopeOf(ctx);
  await db
    .updateTable('sandbox_usage')
    .set({ ended_at: ctx.now })
    .where('platform_scope', '=', scope)
    .where('organization', '=', organization)
    .where('ended_at', 'is', null)
    .execute();
  if (!workloads.running) return;
  const { gpus } = workloads;
  // Each VM at its own size (VM_SIZE when it was not made with one), DATABASE_SIZE per database.
  const held = await heldBy(db, scope, organization, workloads);
  if (held.vcpu === 0 && Object.values(gpus).every((n) => n === 0)) return;
  await db
    .insertInto('sandbox_usage')
    .values({ platform_scope: scope, organization, started_at: ctx.now, ended_at: null, ...held, gpus: JSON.stringify(gpus) })
    .execute();
}

const userName = (user: UserRef) => `${user.organization}/${user.username}`;

/** A new user's attributes in the sandbox's identity realm. */
const userAttrs = (user: UserSpec) => ({ email: user.email, role: user.role, owner: user.isOwner, required_actions: [] as string[] });

/** Simulated work starts when its operation was opened (or now, outside an operation). */
function startOf(ctx: PlatformContext): number {
  return (ctx.operation?.createdAt ?? ctx.now).getTime();
}

function progressOf(row: ObjectRow, now: Date): Progress {
  if (row.ready_at > now) return { state: 'in_progress', until: row.ready_at };
  if (row.failure_code) {
    const code = isFailureCode(row.failure_code) ? row.failure_code : 'PROVISIONING_FAILED';
    return { state: 'failed', code, message: row.failure_message ?? failureMessage(code) };
  }
  return { state: 'done' };
}

/** The locked allocator lost a race with the one-statement path (it reads again). */
const CLASH = Symbol('clash');

/**
 * How often the lock-free path asks again after a clash before taking the lock: each clash is another
 * allocator's range, so a handful covers the engine's workers allocating together.
 */
const FAST_ATTEMPTS = 8;
