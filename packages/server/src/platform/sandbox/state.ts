import { setTimeout as delay } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import { precompile } from '../../infra/db/precompiled.ts';
import { failureMessage, isFailureCode } from '../failures.ts';
import type { PlatformContext, Progress } from '../platform.ts';
import type { SandboxObjectKind, SandboxScope, SandboxTables } from './tables.ts';

/** What every sandbox call works on: its own database access and its timings. */
export interface Sandbox {
  /** The sandbox's own access to the database (its tables, its transactions: never a caller's). */
  db: Kysely<SandboxTables>;
  customerMs: number;
  projectMs: number;
  teardownMs: number;
  ranges: number;
  callMs: number;
}

/** A provisioning step that never finishes (an injected PROVISIONING_TIMEOUT): the engine times it out. */
const NEVER = new Date('9999-12-31T00:00:00Z');

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
export const scopeOf = (ctx: PlatformContext): SandboxScope => (ctx.mode === 'live' ? 'live' : `test:${ctx.partnerId}`);

/**
 * A new object, or the one already there (a repeat after a crash finds the first insert's object: the
 * same outcome, never a second failure): one statement, compiled once.
 */
const insertObjectStatement = precompile(
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

export async function latency(s: Sandbox, ctx: PlatformContext): Promise<void> {
  if (s.callMs > 0) await delay(s.callMs, undefined, ctx.signal ? { signal: ctx.signal } : {});
}

/**
 * Whether a failure may have been injected for this step (test mode, inside that operation). There
 * an object is read before it is inserted, so a repeated look finds the first one's object and never
 * takes a second failure; elsewhere the insert comes first and answers the object either way.
 */
export function failureInjectable(ctx: PlatformContext, step: 'customer.create' | 'project.create'): boolean {
  return ctx.mode === 'test' && ctx.operation?.type === step;
}

export async function object(s: Sandbox, ctx: PlatformContext, kind: SandboxObjectKind, name: string): Promise<ObjectRow | undefined> {
  return s.db
    .selectFrom('sandbox_objects')
    .select(OBJECT_COLUMNS)
    .where('platform_scope', '=', scopeOf(ctx))
    .where('kind', '=', kind)
    .where('name', '=', name)
    .executeTakeFirst();
}

/** Creates an object that becomes ready after `takesMs`, or fails then if a matching failure was injected. */
export async function insertObject(
  s: Sandbox,
  ctx: PlatformContext,
  kind: SandboxObjectKind,
  name: string,
  organization: string,
  takesMs: number,
  failureType: 'customer.create' | 'project.create',
  attrs: Record<string, unknown>,
): Promise<ObjectRow> {
  // Failures are injected through test helpers, so only test mode looks for them.
  const failure = failureInjectable(ctx, failureType) ? await takeFailure(s, ctx, failureType) : undefined;
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
    await insertObjectStatement(s.db, {
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
  return found ?? (await object(s, ctx, kind, name)) ?? row;
}

export async function takeFailure(
  s: Sandbox,
  ctx: PlatformContext,
  type: string,
): Promise<{ code: string; message: string | null } | undefined> {
  const target = ctx.operation;
  const result = await sql<{ code: string; message: string | null }>`
    update sandbox_failures set remaining = remaining - 1
    where id = (
      select id from sandbox_failures
      where platform_scope = ${scopeOf(ctx)} and type = ${type} and remaining > 0
        and (customer_id is null or customer_id = ${target?.customerId ?? null})
        and (project is null or project = ${target?.project ?? null})
      order by id limit 1 for update)
    returning code, message`.execute(s.db);
  return result.rows[0];
}

export async function tombstone(s: Sandbox, ctx: PlatformContext, organization: string): Promise<ObjectRow> {
  const row: ObjectRow = { ready_at: ctx.now, failure_code: null, failure_message: null, gone_at: null, attrs: {} };
  await s.db
    .insertInto('sandbox_objects')
    .values({ platform_scope: scopeOf(ctx), kind: 'organization', name: organization, organization, ...row, attrs: '{}' })
    .onConflict((oc) => oc.columns(['platform_scope', 'kind', 'name']).doNothing())
    .execute();
  return (await object(s, ctx, 'organization', organization)) ?? row;
}

export async function forget(s: Sandbox, ctx: PlatformContext, organization: string): Promise<void> {
  await s.db
    .deleteFrom('sandbox_objects')
    .where('platform_scope', '=', scopeOf(ctx))
    .where('kind', '=', 'organization')
    .where('name', '=', organization)
    .execute();
}

export async function markGone(s: Sandbox, ctx: PlatformContext, kind: SandboxObjectKind, name: string, takesMs: number): Promise<Date> {
  const goneAt = new Date(startOf(ctx) + takesMs);
  // The first mark wins: a repeat keeps the teardown's original end.
  const row = await s.db
    .updateTable('sandbox_objects')
    .set({ gone_at: sql`coalesce(gone_at, ${goneAt}::timestamptz)` })
    .where('platform_scope', '=', scopeOf(ctx))
    .where('kind', '=', kind)
    .where('name', '=', name)
    .returning('gone_at')
    .executeTakeFirst();
  return row?.gone_at ?? goneAt;
}

/** Simulated work starts when its operation was opened (or now, outside an operation). */
export function startOf(ctx: PlatformContext): number {
  return (ctx.operation?.createdAt ?? ctx.now).getTime();
}

export function progressOf(row: ObjectRow, now: Date): Progress {
  if (row.ready_at > now) return { state: 'in_progress', until: row.ready_at };
  if (row.failure_code) {
    const code = isFailureCode(row.failure_code) ? row.failure_code : 'PROVISIONING_FAILED';
    return { state: 'failed', code, message: row.failure_message ?? failureMessage(code) };
  }
  return { state: 'done' };
}
