import { sql } from 'kysely';
import type { ConsoleLoginGrant, PlatformContext, Progress, UserRef, UserSpec } from '../platform.ts';
import { latency, object, type Sandbox, scopeOf } from './state.ts';

export async function ensureUser(s: Sandbox, ctx: PlatformContext, user: UserSpec): Promise<Progress> {
  await latency(s, ctx);
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
    select ready_at, gone_at from org`.execute(s.db);
  const org = rows[0];
  if (!org || org.gone_at)
    return { state: 'failed', code: 'UPSTREAM_NOT_FOUND', message: `Organization ${user.organization} does not exist.` };
  if (org.ready_at > ctx.now) return { state: 'in_progress', until: org.ready_at };
  return { state: 'done' };
}

export async function deleteUser(s: Sandbox, ctx: PlatformContext, user: UserRef): Promise<Progress> {
  await latency(s, ctx);
  await s.db
    .deleteFrom('sandbox_objects')
    .where('platform_scope', '=', scopeOf(ctx))
    .where('kind', '=', 'user')
    .where('name', '=', userName(user))
    .execute();
  return { state: 'done' };
}

/** Sandbox only (test helper): the identity provider's pending actions for a user. */
export async function setRequiredActions(s: Sandbox, ctx: PlatformContext, user: UserRef, actions: string[]): Promise<void> {
  await s.db
    .updateTable('sandbox_objects')
    .set({ attrs: sql`jsonb_set(attrs, '{required_actions}', ${JSON.stringify(actions)}::jsonb)` })
    .where('platform_scope', '=', scopeOf(ctx))
    .where('kind', '=', 'user')
    .where('name', '=', userName(user))
    .execute();
}

export async function prepareConsoleLogin(s: Sandbox, ctx: PlatformContext, user: UserRef): Promise<ConsoleLoginGrant> {
  await latency(s, ctx);
  const row = await object(s, ctx, 'user', userName(user));
  const actions = ((row?.attrs ?? {}) as { required_actions?: string[] }).required_actions ?? [];
  // The sandbox has no identity provider of its own: Tenantry mints the one-time link.
  return actions.length > 0 ? { state: 'action_required', actions } : { state: 'ready' };
}

export const userName = (user: UserRef) => `${user.organization}/${user.username}`;

/** A new user's attributes in the sandbox's identity realm. */
export const userAttrs = (user: UserSpec) => ({
  email: user.email,
  role: user.role,
  owner: user.isOwner,
  required_actions: [] as string[],
});
