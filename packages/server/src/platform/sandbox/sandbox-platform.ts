import ipaddr from 'ipaddr.js';
import { sql } from 'kysely';
import type { SandboxObjectKind } from '../../infra/db/schema.ts';
import {
  NO_WORKLOADS,
  type Platform,
  type PlatformContext,
  type PlatformUser,
  type PlatformVm,
  type Progress,
  type UsageTotals,
  type Workloads,
} from '../platform.ts';
import { createSandboxVm, heldBy } from './sandbox-vms.ts';

export { DATABASE_SIZE, VM_SIZE } from './sandbox-vms.ts';

export interface SandboxOptions {
  /** The customer's provisioning time (TENANTRY_SANDBOX_DELAY_MS); a project takes two thirds, teardown twenty times. */
  delayMs: number;
  /** Workload address ranges (/24) each partner has per mode; exhausting them gives NO_ADDRESS_SPACE. */
  addressRanges?: number;
}

/** Each partner's pool per mode: 10.0.0.0/14 cut into /24 ranges (1,024). */
export const DEFAULT_ADDRESS_RANGES = 1024;
const POOL_BASE = ipaddr.IPv4.parse('10.0.0.0').toByteArray();
/** A provisioning step that never finishes (an injected PROVISIONING_TIMEOUT): the engine times it out. */
const NEVER = new Date('9999-12-31T00:00:00Z');

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

/**
 * The simulated platform of CONTRACT §8, kept in the same database: its
 * organizations, projects and users (`sandbox_objects`), address ranges,
 * workloads and injected failures. Objects take realistic time to become
 * ready or gone, measured on the caller's mode clock, so grace periods,
 * teardown and timeouts follow a test clock that is advanced.
 */
export class SandboxPlatform implements Platform {
  readonly name = 'sandbox' as const;
  readonly #customerMs: number;
  readonly #projectMs: number;
  readonly #teardownMs: number;
  readonly #ranges: number;

  constructor(options: SandboxOptions) {
    this.#customerMs = options.delayMs;
    this.#projectMs = Math.round((options.delayMs * 2) / 3);
    this.#teardownMs = options.delayMs * 20;
    this.#ranges = options.addressRanges ?? DEFAULT_ADDRESS_RANGES;
  }

  async createOrganization(ctx: PlatformContext, org: { customerId: string; displayName: string | null }): Promise<Progress> {
    const row =
      (await this.#object(ctx, 'organization', org.customerId)) ??
      (await this.#insertObject(ctx, 'organization', org.customerId, org.customerId, this.#customerMs, 'customer.create', {
        display_name: org.displayName,
      }));
    return progressOf(row, ctx.now);
  }

  async deleteOrganization(ctx: PlatformContext, customerId: string): Promise<Progress> {
    // Teardown takes its time even for an organization whose creation had not started yet.
    const org = (await this.#object(ctx, 'organization', customerId)) ?? (await this.#tombstone(ctx, customerId));
    const goneAt = org.gone_at ?? (await this.#markGone(ctx, 'organization', customerId, this.#teardownMs));
    if (goneAt > ctx.now) return { state: 'in_progress', until: goneAt };
    const { db, scope, partnerId, mode } = ctx;
    await db
      .deleteFrom('sandbox_address_ranges')
      .where('partner_id', '=', partnerId)
      .where('mode', '=', mode)
      .where('namespace', 'in', (q) =>
        q
          .selectFrom('sandbox_objects')
          .select('name')
          .where('platform_scope', '=', scope)
          .where('kind', '=', 'project')
          .where('customer_id', '=', customerId),
      )
      .execute();
    await db.deleteFrom('sandbox_objects').where('platform_scope', '=', scope).where('customer_id', '=', customerId).execute();
    await db.deleteFrom('sandbox_workloads').where('platform_scope', '=', scope).where('customer_id', '=', customerId).execute();
    await db.deleteFrom('sandbox_vms').where('platform_scope', '=', scope).where('customer_id', '=', customerId).execute();
    await this.#accrue(ctx, customerId, NO_WORKLOADS);
    return { state: 'done' };
  }

  async allocateAddressRange(ctx: PlatformContext, namespace: string): Promise<string | undefined> {
    const { db, partnerId, mode } = ctx;
    // One allocator per partner and mode at a time (the lock ends with the caller's transaction).
    await sql`select pg_advisory_xact_lock(hashtext(${`sandbox-ranges:${partnerId}:${mode}`}))`.execute(db);
    // The namespace's range if it has one, and the highest range taken, in one read.
    const top = await sql<{ mine: string | null; max: number | null }>`
      select max(case when namespace = ${namespace} then cidr end) as mine, max(idx) as max
      from sandbox_address_ranges where partner_id = ${partnerId} and mode = ${mode}`.execute(db);
    const found = top.rows[0];
    if (found?.mine) return found.mine;
    let idx: number | undefined = found?.max == null ? 0 : Number(found.max) + 1;
    if (idx >= this.#ranges) {
      // The top is taken: look for a range released below it.
      const gap = await sql<{ i: number }>`
        select s.i from generate_series(0, ${this.#ranges - 1}) as s(i)
        where not exists (select 1 from sandbox_address_ranges r where r.partner_id = ${partnerId} and r.mode = ${mode} and r.idx = s.i)
        order by s.i limit 1`.execute(db);
      idx = gap.rows[0]?.i;
    }
    if (idx === undefined) return undefined;
    const cidr = rangeCidr(idx);
    await db.insertInto('sandbox_address_ranges').values({ partner_id: partnerId, mode, idx, cidr, namespace }).execute();
    return cidr;
  }

  async createProject(
    ctx: PlatformContext,
    project: { customerId: string; name: string; namespace: string; cidr: string },
  ): Promise<Progress> {
    const row =
      (await this.#object(ctx, 'project', project.namespace)) ??
      (await this.#insertObject(ctx, 'project', project.namespace, project.customerId, this.#projectMs, 'project.create', {
        project: project.name,
        cidr: project.cidr,
      }));
    return progressOf(row, ctx.now);
  }

  async deleteProject(ctx: PlatformContext, project: { customerId: string; namespace: string }): Promise<Progress> {
    const row = await this.#object(ctx, 'project', project.namespace);
    if (row) {
      const goneAt = row.gone_at ?? (await this.#markGone(ctx, 'project', project.namespace, this.#projectMs));
      if (goneAt > ctx.now) return { state: 'in_progress', until: goneAt };
    }
    const { db, scope, partnerId, mode } = ctx;
    await db
      .deleteFrom('sandbox_address_ranges')
      .where('partner_id', '=', partnerId)
      .where('mode', '=', mode)
      .where('namespace', '=', project.namespace)
      .execute();
    await db
      .deleteFrom('sandbox_objects')
      .where('platform_scope', '=', scope)
      .where('kind', '=', 'project')
      .where('name', '=', project.namespace)
      .execute();
    return { state: 'done' };
  }

  async createUser(ctx: PlatformContext, user: PlatformUser): Promise<void> {
    await ctx.db
      .insertInto('sandbox_objects')
      .values({
        platform_scope: ctx.scope,
        kind: 'user',
        name: `${user.customerId}/${user.username}`,
        customer_id: user.customerId,
        ready_at: ctx.now,
        failure_code: null,
        failure_message: null,
        gone_at: null,
        attrs: JSON.stringify({ email: user.email, role: user.role, required_actions: [] }),
      })
      .onConflict((oc) => oc.columns(['platform_scope', 'kind', 'name']).doNothing())
      .execute();
  }

  async deleteUser(ctx: PlatformContext, user: { customerId: string; username: string }): Promise<void> {
    await ctx.db
      .deleteFrom('sandbox_objects')
      .where('platform_scope', '=', ctx.scope)
      .where('kind', '=', 'user')
      .where('name', '=', `${user.customerId}/${user.username}`)
      .execute();
  }

  /** Sandbox only (test helper): the identity provider's pending actions for a user. */
  async setRequiredActions(ctx: PlatformContext, user: { customerId: string; username: string }, actions: string[]): Promise<void> {
    await ctx.db
      .updateTable('sandbox_objects')
      .set({ attrs: sql`jsonb_set(attrs, '{required_actions}', ${JSON.stringify(actions)}::jsonb)` })
      .where('platform_scope', '=', ctx.scope)
      .where('kind', '=', 'user')
      .where('name', '=', `${user.customerId}/${user.username}`)
      .execute();
  }

  async prepareConsoleLogin(ctx: PlatformContext, user: { customerId: string; username: string }): Promise<{ requiredActions: string[] }> {
    const row = await this.#object(ctx, 'user', `${user.customerId}/${user.username}`);
    const attrs = (row?.attrs ?? {}) as { required_actions?: string[] };
    return { requiredActions: attrs.required_actions ?? [] };
  }

  async listWorkloads(ctx: PlatformContext, customerId: string): Promise<Workloads> {
    const row = await ctx.db
      .selectFrom('sandbox_workloads')
      .select(['vms', 'databases', 'gpus', 'running'])
      .where('platform_scope', '=', ctx.scope)
      .where('customer_id', '=', customerId)
      .executeTakeFirst();
    if (!row) return { vms: [], databases: [], gpus: {}, running: true };
    return { vms: row.vms, databases: row.databases, gpus: row.gpus as Record<string, number>, running: row.running };
  }

  async stopWorkloads(ctx: PlatformContext, customerId: string): Promise<Workloads> {
    return this.#setRunning(ctx, customerId, false);
  }

  async startWorkloads(ctx: PlatformContext, customerId: string): Promise<Workloads> {
    return this.#setRunning(ctx, customerId, true);
  }

  /** Sandbox only (test helper): replaces the customer's live workloads. */
  async setWorkloads(ctx: PlatformContext, customerId: string, workloads: Workloads): Promise<Workloads> {
    const values = {
      vms: workloads.vms,
      databases: workloads.databases,
      gpus: JSON.stringify(workloads.gpus),
      running: workloads.running,
    };
    await ctx.db
      .insertInto('sandbox_workloads')
      .values({ platform_scope: ctx.scope, customer_id: customerId, ...values })
      .onConflict((oc) => oc.columns(['platform_scope', 'customer_id']).doUpdateSet(values))
      .execute();
    await this.#accrue(ctx, customerId, workloads);
    return workloads;
  }

  async createVm(ctx: PlatformContext, vm: PlatformVm): Promise<Progress> {
    return createSandboxVm(
      ctx,
      vm,
      (c) => this.listWorkloads(c, vm.customerId),
      (c, workloads) => this.#accrue(c, vm.customerId, workloads),
    );
  }

  async gpuUsage(ctx: PlatformContext, customerId: string): Promise<Record<string, number> | undefined> {
    // Test mode can make the check fail (CONTRACT §5, failures of type gpu_usage).
    if (ctx.mode === 'test' && (await this.#takeFailure(ctx, 'gpu_usage'))) return undefined;
    const workloads = await this.listWorkloads(ctx, customerId);
    return workloads.running ? workloads.gpus : {};
  }

  async usage(
    ctx: PlatformContext,
    customers: { customerId: string; since: Date }[],
    from: Date,
    to: Date,
  ): Promise<Map<string, UsageTotals>> {
    const totals = new Map<string, UsageTotals>(
      customers.map((c) => [c.customerId, { vcpu_hours: 0, memory_gib_hours: 0, storage_gib_hours: 0, gpu_hours: {} }]),
    );
    if (customers.length === 0) return totals;
    const since = new Map(customers.map((c) => [c.customerId, c.since.getTime()]));
    const spans = await ctx.db
      .selectFrom('sandbox_usage')
      .selectAll()
      .where('platform_scope', '=', ctx.scope)
      .where('customer_id', 'in', [...since.keys()])
      .where('started_at', '<', to)
      .where((eb) => eb.or([eb('ended_at', 'is', null), eb('ended_at', '>', from)]))
      .execute();
    for (const span of spans) {
      const start = Math.max(span.started_at.getTime(), from.getTime(), since.get(span.customer_id) ?? 0);
      const end = Math.min((span.ended_at ?? ctx.now).getTime(), to.getTime(), ctx.now.getTime());
      if (end <= start) continue;
      const hours = (end - start) / 3_600_000;
      const total = totals.get(span.customer_id);
      if (!total) continue;
      total.vcpu_hours += span.vcpu * hours;
      total.memory_gib_hours += span.memory_gib * hours;
      total.storage_gib_hours += span.storage_gib * hours;
      for (const [profile, n] of Object.entries(span.gpus)) total.gpu_hours[profile] = (total.gpu_hours[profile] ?? 0) + n * hours;
    }
    return totals;
  }

  /** Sandbox only (test helper): the next matching provisioning steps fail. */
  async injectFailure(ctx: PlatformContext, failure: FailureInjection): Promise<void> {
    await ctx.db
      .insertInto('sandbox_failures')
      .values({
        platform_scope: ctx.scope,
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

  async #setRunning(ctx: PlatformContext, customerId: string, running: boolean): Promise<Workloads> {
    await ctx.db
      .updateTable('sandbox_workloads')
      .set({ running })
      .where('platform_scope', '=', ctx.scope)
      .where('customer_id', '=', customerId)
      .execute();
    const workloads = await this.listWorkloads(ctx, customerId);
    await this.#accrue(ctx, customerId, workloads);
    return workloads;
  }

  /**
   * Usage accrues while workloads run: the open span of the customer ends now, and a new one starts
   * with what now runs (each VM at its size, VM_SIZE when it has none; DATABASE_SIZE per database; GPUs as
   * granted to workloads).
   */
  async #accrue(ctx: PlatformContext, customerId: string, workloads: Workloads): Promise<void> {
    await ctx.db
      .updateTable('sandbox_usage')
      .set({ ended_at: ctx.now })
      .where('platform_scope', '=', ctx.scope)
      .where('customer_id', '=', customerId)
      .where('ended_at', 'is', null)
      .execute();
    if (!workloads.running) return;
    const { gpus } = workloads;
    const held = await heldBy(ctx, customerId, workloads);
    if (held.vcpu === 0 && Object.values(gpus).every((n) => n === 0)) return;
    await ctx.db
      .insertInto('sandbox_usage')
      .values({
        platform_scope: ctx.scope,
        customer_id: customerId,
        started_at: ctx.now,
        ended_at: null,
        ...held,
        gpus: JSON.stringify(gpus),
      })
      .execute();
  }

  async #object(ctx: PlatformContext, kind: SandboxObjectKind, name: string): Promise<ObjectRow | undefined> {
    return ctx.db
      .selectFrom('sandbox_objects')
      .select(['ready_at', 'failure_code', 'failure_message', 'gone_at', 'attrs'])
      .where('platform_scope', '=', ctx.scope)
      .where('kind', '=', kind)
      .where('name', '=', name)
      .executeTakeFirst();
  }

  /** Creates an object that becomes ready after `takesMs`, or fails then if a matching failure was injected. */
  async #insertObject(
    ctx: PlatformContext,
    kind: SandboxObjectKind,
    name: string,
    customerId: string,
    takesMs: number,
    failureType: 'customer.create' | 'project.create',
    attrs: Record<string, unknown>,
  ): Promise<ObjectRow> {
    // Failures are injected through test helpers, so only test mode looks for them.
    const failure = ctx.mode === 'test' && ctx.operation?.type === failureType ? await this.#takeFailure(ctx, failureType) : undefined;
    const timesOut = failure?.code === 'PROVISIONING_TIMEOUT';
    const row: ObjectRow = {
      ready_at: timesOut ? NEVER : new Date(startOf(ctx) + takesMs),
      failure_code: timesOut ? null : (failure?.code ?? null),
      failure_message: timesOut ? null : (failure?.message ?? null),
      gone_at: null,
      attrs,
    };
    await ctx.db
      .insertInto('sandbox_objects')
      .values({ platform_scope: ctx.scope, kind, name, customer_id: customerId, ...row, attrs: JSON.stringify(attrs) })
      .execute();
    return row;
  }

  async #takeFailure(ctx: PlatformContext, type: string): Promise<{ code: string; message: string | null } | undefined> {
    const target = ctx.operation;
    const result = await sql<{ code: string; message: string | null }>`
      update sandbox_failures set remaining = remaining - 1
      where id = (
        select id from sandbox_failures
        where platform_scope = ${ctx.scope} and type = ${type} and remaining > 0
          and (customer_id is null or customer_id = ${target?.customerId ?? null})
          and (project is null or project = ${target?.project ?? null})
        order by id limit 1 for update)
      returning code, message`.execute(ctx.db);
    return result.rows[0];
  }

  async #tombstone(ctx: PlatformContext, customerId: string): Promise<ObjectRow> {
    const row: ObjectRow = { ready_at: ctx.now, failure_code: null, failure_message: null, gone_at: null, attrs: {} };
    await ctx.db
      .insertInto('sandbox_objects')
      .values({ platform_scope: ctx.scope, kind: 'organization', name: customerId, customer_id: customerId, ...row, attrs: '{}' })
      .execute();
    return row;
  }

  async #markGone(ctx: PlatformContext, kind: SandboxObjectKind, name: string, takesMs: number): Promise<Date> {
    const goneAt = new Date(startOf(ctx) + takesMs);
    await ctx.db
      .updateTable('sandbox_objects')
      .set({ gone_at: goneAt })
      .where('platform_scope', '=', ctx.scope)
      .where('kind', '=', kind)
      .where('name', '=', name)
      .execute();
    return goneAt;
  }
}

/** Simulated work starts when its operation was opened (or now, outside an operation). */
function startOf(ctx: PlatformContext): number {
  return (ctx.operation?.createdAt ?? ctx.now).getTime();
}

function progressOf(row: ObjectRow, now: Date): Progress {
  if (row.ready_at > now) return { state: 'in_progress', until: row.ready_at };
  if (row.failure_code) {
    return { state: 'failed', code: row.failure_code, message: row.failure_message ?? failureMessage(row.failure_code) };
  }
  return { state: 'done' };
}

function failureMessage(code: string): string {
  const upstream = /^UPSTREAM_(\d{3})$/.exec(code);
  if (upstream) return `The platform refused a provisioning step with HTTP ${upstream[1]}.`;
  if (code === 'NO_ADDRESS_SPACE') return 'No network address range was left for the project.';
  return 'A provisioning step failed.';
}

function rangeCidr(idx: number): string {
  const bytes = [...POOL_BASE];
  const offset = idx * 256;
  bytes[1] = (bytes[1] ?? 0) + Math.floor(offset / 65536);
  bytes[2] = Math.floor(offset / 256) % 256;
  bytes[3] = 0;
  return `${ipaddr.fromByteArray(bytes).toString()}/24`;
}
