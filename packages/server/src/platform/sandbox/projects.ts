import { sql } from 'kysely';
import { failureMessage } from '../failures.ts';
import type { AddressRange, PlatformContext, Progress, ProjectRef, ProjectSpec } from '../platform.ts';
import { rangeCidr } from './ranges.ts';
import { failureInjectable, insertObject, latency, markGone, object, progressOf, type Sandbox, scopeOf } from './state.ts';

export async function reserveAddressRange(s: Sandbox, ctx: PlatformContext, project: ProjectRef): Promise<AddressRange> {
  await latency(s, ctx);
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
        from top where top.idx < ${s.ranges} and not exists (select 1 from mine)
        on conflict do nothing
        returning cidr
      )
      select coalesce((select cidr from mine), (select cidr from made)) as cidr, (select idx from top) as top`.execute(s.db);
    const row = next.rows[0];
    if (row?.cidr) return { state: 'done', cidr: row.cidr };
    if (row && Number(row.top) >= s.ranges) break;
  }
  // The one-statement path takes no lock: a range it took after the locked path's read is a clash,
  // and the locked path reads again (each clash is a range handed out, so this ends).
  let cidr: string | undefined | typeof CLASH = CLASH;
  for (let attempt = 0; cidr === CLASH && attempt <= s.ranges; attempt++) cidr = await reserveLocked(s, ctx, project);
  if (cidr === CLASH) throw new Error('address range allocation kept clashing');
  if (!cidr) return { state: 'failed', code: 'NO_ADDRESS_SPACE', message: failureMessage('NO_ADDRESS_SPACE') };
  return { state: 'done', cidr };
}

/** Under the partner's allocator lock: the namespace's range, the one above the top, or one released below it. */
async function reserveLocked(s: Sandbox, ctx: PlatformContext, project: ProjectRef): Promise<string | undefined | typeof CLASH> {
  const { partnerId, mode } = ctx;
  return s.db.transaction().execute(async (trx) => {
    // One allocator per partner and mode at a time (the lock ends with this transaction).
    await sql`select pg_advisory_xact_lock(hashtext(${`sandbox-ranges:${partnerId}:${mode}`}))`.execute(trx);
    // The namespace's range if it has one, and the highest range taken, in one read.
    const top = await sql<{ mine: string | null; max: number | null }>`
      select max(case when namespace = ${project.namespace} then cidr end) as mine, max(idx) as max
      from sandbox_address_ranges where partner_id = ${partnerId} and mode = ${mode}`.execute(trx);
    const found = top.rows[0];
    if (found?.mine) return found.mine;
    let idx: number | undefined = found?.max == null ? 0 : Number(found.max) + 1;
    if (idx >= s.ranges) {
      // The top is taken: look for a range released below it.
      const gap = await sql<{ i: number }>`
        select s.i from generate_series(0, ${s.ranges - 1}) as s(i)
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

export async function ensureProject(s: Sandbox, ctx: PlatformContext, project: ProjectSpec): Promise<Progress> {
  await latency(s, ctx);
  const make = () =>
    insertObject(s, ctx, 'project', project.namespace, project.organization, s.projectMs, 'project.create', {
      project: project.project,
      cidr: project.cidr,
    });
  const row = failureInjectable(ctx, 'project.create')
    ? ((await object(s, ctx, 'project', project.namespace)) ?? (await make()))
    : await make();
  return progressOf(row, ctx.now);
}

export async function deleteProject(s: Sandbox, ctx: PlatformContext, project: ProjectRef): Promise<Progress> {
  await latency(s, ctx);
  const row = await object(s, ctx, 'project', project.namespace);
  if (row) {
    const goneAt = row.gone_at ?? (await markGone(s, ctx, 'project', project.namespace, s.projectMs));
    if (goneAt > ctx.now) return { state: 'in_progress', until: goneAt };
  }
  await s.db.transaction().execute(async (trx) => {
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

/** The locked allocator lost a race with the one-statement path (it reads again). */
const CLASH = Symbol('clash');

/**
 * How often the lock-free path asks again after a clash before taking the lock: each clash is another
 * allocator's range, so a handful covers the engine's workers allocating together.
 */
export const FAST_ATTEMPTS = 8;
