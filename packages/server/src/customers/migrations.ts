import { type Kysely, type Migration, sql } from 'kysely';

export const customerMigrations: Record<string, Migration> = {
  '0008_customers_create': {
    async up(db: Kysely<unknown>) {
      await sql`
        create table customers (
          uid text primary key,
          platform_scope text not null,
          partner_id text not null references partners (id),
          mode text not null check (mode in ('live', 'test')),
          id text not null,
          external_id text,
          display_name text,
          status text not null check (status in ('provisioning', 'active', 'failed', 'suspended', 'deletion_scheduled', 'deleting')),
          status_before_deletion text,
          plan_id text not null,
          owner_username text not null,
          owner_email text not null,
          created_at timestamptz not null,
          updated_at timestamptz not null,
          suspended_at timestamptz,
          suspension_reason text,
          scheduled_deletion_at timestamptz,
          grace_days integer,
          deletion_immediate boolean,
          constraint customers_scope_id_key unique (platform_scope, id)
        )`.execute(db);
      // The list order (customer id) and its two filters, each a keyset walk on one index (the first
      // index dropped by 0036: the unique key of 0024 has its columns).
      await sql`create index customers_list_idx on customers (partner_id, mode, id)`.execute(db);
      await sql`create index customers_external_id_idx on customers (partner_id, mode, external_id, id)`.execute(db);
      await sql`create index customers_status_idx on customers (partner_id, mode, status, id)`.execute(db);
      // The engine's scan for grace periods that ended.
      await sql`create index customers_scheduled_deletion_idx on customers (scheduled_deletion_at) where status = 'deletion_scheduled'`.execute(
        db,
      );
    },
  },
  '0024_customers_platform_names': {
    async up(db: Kysely<unknown>) {
      // The customer's organization name on the platform (`<partner prefix>-<id>`), fixed at creation.
      // Customers made before prefixes keep the name they were made with: their id.
      await sql`alter table customers add column organization text`.execute(db);
      await sql`update customers set organization = id`.execute(db);
      await sql`alter table customers alter column organization set not null`.execute(db);
      // Ids are unique per partner and mode; organization names per platform.
      await sql`alter table customers drop constraint customers_scope_id_key`.execute(db);
      await sql`alter table customers add constraint customers_partner_id_key unique (partner_id, mode, id)`.execute(db);
      await sql`alter table customers add constraint customers_scope_organization_key unique (platform_scope, organization)`.execute(db);
      // The operator's hold on resume (partner-api.md, States rule 7).
      await sql`alter table customers add column held_at timestamptz`.execute(db);
      await sql`alter table customers add column hold_reason text`.execute(db);
      // The quota revision the platform has applied; a sweep applies a newer one.
      await sql`alter table customers add column quota_applied_revision integer`.execute(db);
      await sql`update customers set quota_applied_revision = quota_revision`.execute(db);
      await sql`create index customers_quota_pending_idx on customers (uid) where quota_applied_revision is distinct from quota_revision`.execute(
        db,
      );
      // What stays of a deleted customer: usage bills it for the window it lived in.
      await sql`
        create table customer_tombstones (
          uid text primary key,
          partner_id text not null,
          mode text not null,
          id text not null,
          organization text not null,
          created_at timestamptz not null,
          deleted_at timestamptz not null
        )`.execute(db);
      await sql`create index customer_tombstones_list_idx on customer_tombstones (partner_id, mode, id, created_at)`.execute(db);
    },
  },
  '0032_customers_quota_retry': {
    async up(db: Kysely<unknown>) {
      // A quota the platform refused is tried again with backoff, per revision (a new revision at once),
      // so a few customers the platform keeps refusing cannot starve everyone else's quota changes.
      await sql`alter table customers add column quota_retry_revision integer`.execute(db);
      await sql`alter table customers add column quota_retry_at timestamptz`.execute(db);
      await sql`alter table customers add column quota_retry_count integer not null default 0`.execute(db);
      await sql`alter table customers add column quota_retry_problem text`.execute(db);
    },
  },
  '0036_customers_list_index_dropped': {
    async up(db: Kysely<unknown>) {
      // The list's index had the columns of the unique key 0024 added (partner, mode, id): every insert
      // and every change of status wrote both. The unique key's index serves the list alone.
      await sql`drop index if exists customers_list_idx`.execute(db);
    },
  },
  '0039_customers_create_locked': {
    async up(db: Kysely<unknown>) {
      // What a create does under its partner's lock, run by the statement that inserted its rows, so that
      // the whole create is one statement committed on its own: it counts the customer
      // (the partner's row, locked until the commit), writes the new allocation where the quota fits
      // (the capacity lock), then checks what the transaction's path checks, each read with a snapshot
      // taken after the lock (a volatile PL/pgSQL function takes one per statement it runs). Any check
      // that does not plainly pass raises SQLSTATE TN002: the statement writes nothing, and the create
      // runs in a transaction that finds the exact error (customers/service.ts). The lock order is the
      // transaction's: the partner's row, then the capacity allocation.
      await sql`
        create function customer_create_locked(
          p_partner_id text, p_mode text, p_scope text, p_operation_id text,
          p_organization text, p_namespace text, p_default_plan_id text, p_quota jsonb, p_pool jsonb
        ) returns boolean
        language plpgsql volatile as $$
        declare
          partner partners;
          held integer;
          open_operations integer;
        begin
          update partners as p
             set customer_count = p.customer_count + (p_mode = 'live')::int,
                 test_customer_count = p.test_customer_count + (p_mode = 'test')::int
           where p.id = p_partner_id
          returning p.* into partner;
          if not found then
            raise exception using errcode = 'TN002', message = 'no such partner';
          end if;
          held := case when p_mode = 'live' then partner.customer_count else partner.test_customer_count end - 1;
          if partner.max_customers > 0 and held >= partner.max_customers then
            raise exception using errcode = 'TN002', message = 'the partner is at its maximum of customers';
          end if;
          if p_default_plan_id is not null and partner.default_plan_id is distinct from p_default_plan_id then
            raise exception using errcode = 'TN002', message = 'the default plan changed';
          end if;

          -- The capacity lock and the new allocation in one write, where the quota fits. No row: the
          -- partner's first customer of this mode, whose transaction makes the row.
          update capacity_allocations as c set allocated = resources_add(c.allocated, p_quota)
           where c.partner_id = p_partner_id and c.mode = p_mode and resources_fit(p_pool, c.allocated, p_quota);
          if not found then
            raise exception using errcode = 'TN002', message = 'the pool cannot take the quota, or it has no allocation yet';
          end if;

          select count(*) into open_operations
            from (select from operations as o
                   where o.partner_id = p_partner_id and o.mode = p_mode and o.status in ('pending', 'running')
                     and o.id <> p_operation_id
                   limit partner.max_open_operations) as counted;
          if open_operations >= partner.max_open_operations then
            raise exception using errcode = 'TN002', message = 'too many operations open';
          end if;

          if exists (select from projects as pr where pr.platform_scope = p_scope and pr.namespace = p_organization)
             or exists (select from customers as cu where cu.platform_scope = p_scope and cu.organization = p_namespace) then
            raise exception using errcode = 'TN002', message = 'a platform name is taken';
          end if;

          return true;
        end
        $$`.execute(db);
    },
  },
  '0041_customers_create_together': {
    async up(db: Kysely<unknown>) {
      // What 0039's function does for one create, for a batch of a partner's creates of one mode written
      // by one statement: the partner's row counts them all, the allocation takes the sum
      // of their quotas where it fits, and the checks count the batch as one: the maximum of customers
      // and of open operations with every create of the batch, the default plan each create was given,
      // and the platform names of all of them. A check that does not plainly pass raises TN002 as 0039's
      // does: nothing is written, and each create of the batch runs again on its own. 0039's function
      // stays for processes of the previous version while an upgrade rolls.
      await sql`
        create function customers_create_locked(
          p_partner_id text, p_mode text, p_scope text, p_operation_ids text[],
          p_organizations text[], p_namespaces text[], p_default_plan_ids text[], p_quotas jsonb, p_pool jsonb
        ) returns boolean
        language plpgsql volatile as $$
        declare
          n integer := cardinality(p_operation_ids);
          partner partners;
          wanted jsonb := p_quotas -> 0;
          open_operations integer;
        begin
          update partners as p
             set customer_count = p.customer_count + n * (p_mode = 'live')::int,
                 test_customer_count = p.test_customer_count + n * (p_mode = 'test')::int
           where p.id = p_partner_id
          returning p.* into partner;
          if not found then
            raise exception using errcode = 'TN002', message = 'no such partner';
          end if;
          if partner.max_customers > 0
             and (case when p_mode = 'live' then partner.customer_count else partner.test_customer_count end) > partner.max_customers then
            raise exception using errcode = 'TN002', message = 'the partner is at its maximum of customers';
          end if;
          if exists (select from unnest(p_default_plan_ids) as d(plan_id)
                      where d.plan_id is not null and d.plan_id is distinct from partner.default_plan_id) then
            raise exception using errcode = 'TN002', message = 'the default plan changed';
          end if;

          for i in 1 .. n - 1 loop
            wanted := resources_add(wanted, p_quotas -> i);
          end loop;
          update capacity_allocations as c set allocated = resources_add(c.allocated, wanted)
           where c.partner_id = p_partner_id and c.mode = p_mode and resources_fit(p_pool, c.allocated, wanted);
          if not found then
            raise exception using errcode = 'TN002', message = 'the pool cannot take the quotas, or it has no allocation yet';
          end if;

          select count(*) into open_operations
            from (select from operations as o
                   where o.partner_id = p_partner_id and o.mode = p_mode and o.status in ('pending', 'running')
                     and o.id <> all (p_operation_ids)
                   limit partner.max_open_operations) as counted;
          if open_operations + n > partner.max_open_operations then
            raise exception using errcode = 'TN002', message = 'too many operations open';
          end if;

          -- One name at a time: each an index look-up, where "= any (array)" in the function's generic
          -- plan filtered every project of the scope (235 µs against 11 for one create, measured).
          for i in 1 .. n loop
            if exists (select from projects as pr where pr.platform_scope = p_scope and pr.namespace = p_organizations[i])
               or exists (select from customers as cu where cu.platform_scope = p_scope and cu.organization = p_namespaces[i]) then
              raise exception using errcode = 'TN002', message = 'a platform name is taken';
            end if;
          end loop;

          return true;
        end
        $$`.execute(db);
    },
  },
  '0043_customers_create_functions_dropped': {
    async up(db: Kysely<unknown>) {
      // A create's checks run in TypeScript, in the create's transaction; no process calls these any more.
      await sql`drop function if exists customer_create_locked(text, text, text, text, text, text, text, jsonb, jsonb)`.execute(db);
      await sql`drop function if exists customers_create_locked(text, text, text, text[], text[], text[], text[], jsonb, jsonb)`.execute(
        db,
      );
    },
  },
  '0049_customers_quota_columns_dropped': {
    async up(db: Kysely<unknown>) {
      // The plan and quota moved to capacity's customer_quotas (0048); the pending index goes with its column.
      for (const column of [
        'plan_id',
        'quota',
        'quota_revision',
        'project_caps',
        'quota_applied_revision',
        'quota_retry_revision',
        'quota_retry_at',
        'quota_retry_count',
        'quota_retry_problem',
      ]) {
        await sql`alter table customers drop column ${sql.ref(column)}`.execute(db);
      }
    },
  },
};
