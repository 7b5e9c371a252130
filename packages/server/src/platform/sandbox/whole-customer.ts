import { type Kysely, sql } from 'kysely';
import { precompile } from '../../infra/db/precompiled.ts';
import type { KeyMode } from '../../infra/mode.ts';
import { rangeCidr } from './ranges.ts';
import type { SandboxScope, SandboxTables } from './tables.ts';

/** What one look at a whole new customer needs (`SandboxPlatform.provisionCustomer`). */
export interface WholeCustomer {
  scope: SandboxScope;
  now: Date;
  organization: string;
  organizationReadyAt: Date;
  /** The organization's attributes when it is made: its display name, plan and quota. */
  organizationAttrs: string;
  /** The plan and quota merged into an organization already there (`applyQuota`'s write). */
  quotaAttrs: string;
  user: string;
  userAttrs: string;
  partnerId: string;
  mode: KeyMode;
  namespace: string;
  ranges: number;
  projectReadyAt: Date;
  project: string;
}

/** What the statement found: null where it stopped (see `provisionWhole`). */
export interface WholeCustomerRow {
  organization_ready_at: Date | null;
  cidr: string | null;
  /** The index above the highest range taken: at the pool's size, no range is left above it. */
  top: number | null;
  project_ready_at: Date | null;
  project_failed: boolean | null;
}

/**
 * One look at a new customer in one statement, doing what the sandbox's `ensureOrganization`,
 * `applyQuota`, `ensureUser`, `reserveAddressRange` and `ensureProject` do one after another,
 * each part only once the part before it may go:
 * - the organization, made with its plan and quota, or the one already there with the plan and quota
 *   merged in; nothing when that one is going or has failed (`organization_ready_at` null);
 * - once it is ready, the owner (a user already there is the owner made by an earlier look), and the
 *   project's address range: the namespace's own, or the one above the highest taken, as the
 *   allocator's lock-free statement takes it (`cidr` null on a clash, asked again while `top` is
 *   below the pool's size; or on a full pool, where the allocator's locked path decides);
 * - with a range, the project, or the one already there (`project_ready_at`, `project_failed`).
 * Data-modifying parts run whether or not they are read, and all see the statement's one snapshot.
 */
export const provisionWhole = precompile((db: Kysely<SandboxTables>, a: WholeCustomer) => ({
  compile: () =>
    sql<WholeCustomerRow>`
      with org as (
        insert into sandbox_objects (platform_scope, kind, name, organization, ready_at, failure_code, failure_message, gone_at, attrs)
        values (${a.scope}, 'organization', ${a.organization}, ${a.organization}, ${a.organizationReadyAt}::timestamptz, null, null, null, ${a.organizationAttrs}::jsonb)
        on conflict (platform_scope, kind, name) do update set attrs = sandbox_objects.attrs || ${a.quotaAttrs}::jsonb
          where sandbox_objects.gone_at is null and sandbox_objects.failure_code is null
        returning ready_at
      ), ready as (
        select 1 from org where ready_at <= ${a.now}::timestamptz
      ), owner as (
        insert into sandbox_objects (platform_scope, kind, name, organization, ready_at, failure_code, failure_message, gone_at, attrs)
        select ${a.scope}, 'user', ${a.user}, ${a.organization}, ${a.now}::timestamptz, null, null, null, ${a.userAttrs}::jsonb from ready
        on conflict (platform_scope, kind, name) do nothing
      ), mine as (
        select cidr from sandbox_address_ranges where partner_id = ${a.partnerId} and mode = ${a.mode} and namespace = ${a.namespace}
      ), top as (
        select coalesce(max(idx) + 1, 0) as idx from sandbox_address_ranges where partner_id = ${a.partnerId} and mode = ${a.mode}
      ), made as (
        insert into sandbox_address_ranges (partner_id, mode, idx, cidr, namespace)
        select ${a.partnerId}, ${a.mode}, top.idx, ${rangeCidr(sql.ref('top.idx'))}, ${a.namespace}
        from top, ready where top.idx < ${a.ranges} and not exists (select 1 from mine)
        on conflict do nothing
        returning cidr
      ), range as (
        select coalesce((select cidr from mine), (select cidr from made)) as cidr from ready
      ), added as (
        insert into sandbox_objects (platform_scope, kind, name, organization, ready_at, failure_code, failure_message, gone_at, attrs)
        select ${a.scope}, 'project', ${a.namespace}, ${a.organization}, ${a.projectReadyAt}::timestamptz, null, null, null,
               jsonb_build_object('project', ${a.project}::text, 'cidr', range.cidr)
        from range where range.cidr is not null
        on conflict (platform_scope, kind, name) do nothing
        returning ready_at, failure_code
      ), project as (
        select ready_at, failure_code from added
        union all
        select ready_at, failure_code from sandbox_objects
        where platform_scope = ${a.scope} and kind = 'project' and name = ${a.namespace} and gone_at is null
          and exists (select 1 from range where cidr is not null) and not exists (select 1 from added)
      )
      select (select ready_at from org) as organization_ready_at, (select cidr from range) as cidr, (select idx from top) as top,
             (select ready_at from project) as project_ready_at, (select failure_code is not null from project) as project_failed`.compile(
      db,
    ),
}));
