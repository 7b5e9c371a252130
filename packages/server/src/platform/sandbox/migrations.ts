import { type Kysely, type Migration, sql } from 'kysely';

/** The sandbox platform's own state: what a cluster and its identity provider would hold. */
export const sandboxMigrations: Record<string, Migration> = {
  '0013_sandbox_create': {
    async up(db: Kysely<unknown>) {
      await sql`
        create table sandbox_objects (
          platform_scope text not null,
          kind text not null check (kind in ('organization', 'project', 'user')),
          name text not null,
          customer_id text not null,
          ready_at timestamptz not null,
          failure_code text,
          failure_message text,
          gone_at timestamptz,
          attrs jsonb not null default '{}',
          primary key (platform_scope, kind, name)
        )`.execute(db);
      await sql`create index sandbox_objects_customer_idx on sandbox_objects (platform_scope, customer_id)`.execute(db);
      await sql`
        create table sandbox_address_ranges (
          partner_id text not null,
          mode text not null,
          idx integer not null,
          cidr text not null,
          namespace text not null,
          primary key (partner_id, mode, idx)
        )`.execute(db);
      await sql`
        create table sandbox_workloads (
          platform_scope text not null,
          customer_id text not null,
          vms text[] not null default '{}',
          databases text[] not null default '{}',
          gpus jsonb not null default '{}',
          running boolean not null default true,
          primary key (platform_scope, customer_id)
        )`.execute(db);
      await sql`
        create table sandbox_failures (
          id serial primary key,
          platform_scope text not null,
          type text not null,
          code text,
          message text,
          customer_id text,
          project text,
          remaining integer not null,
          created_at timestamptz not null
        )`.execute(db);
    },
  },
  '0017_sandbox_usage': {
    async up(db: Kysely<unknown>) {
      // Spans during which a customer's workloads ran, with what they held: usage is their sum.
      await sql`
        create table sandbox_usage (
          id bigint generated always as identity primary key,
          platform_scope text not null,
          customer_id text not null,
          started_at timestamptz not null,
          ended_at timestamptz,
          vcpu integer not null,
          memory_gib integer not null,
          storage_gib integer not null,
          gpus jsonb not null
        )`.execute(db);
      await sql`create index sandbox_usage_customer_idx on sandbox_usage (platform_scope, customer_id, started_at)`.execute(db);
    },
  },
  '0021_sandbox_by_organization': {
    async up(db: Kysely<unknown>) {
      // The sandbox names what it holds as the platform does: by organization (`<prefix>-<customer id>`
      // for new customers; the customer id for those made before prefixes, which is their organization).
      for (const table of ['sandbox_objects', 'sandbox_workloads', 'sandbox_usage']) {
        await sql`alter table ${sql.table(table)} rename column customer_id to organization`.execute(db);
      }
    },
  },
  '0030_sandbox_vms': {
    async up(db: Kysely<unknown>) {
      // VMs made from the console's form: their size (usage and quota count it) and the image they boot.
      await sql`
        create table sandbox_vms (
          platform_scope text not null,
          organization text not null,
          name text not null,
          namespace text not null,
          vcpu integer not null,
          memory_gib integer not null,
          storage_gib integer not null,
          image jsonb not null,
          created_at timestamptz not null,
          primary key (platform_scope, organization, name)
        )`.execute(db);
    },
  },
  '0034_sandbox_range_per_namespace': {
    async up(db: Kysely<unknown>) {
      // One range per namespace, held by the database: the allocator's one-statement path relies on it.
      // Existing rows satisfy it: the allocator's lock keeps it so too.
      await sql`create unique index sandbox_address_ranges_namespace on sandbox_address_ranges (partner_id, mode, namespace)`.execute(db);
    },
  },
  '0050_sandbox_vms_halted': {
    async up(db: Kysely<unknown>) {
      // VMs the customer stopped itself (the console's Stop): they stay, and do not run while the others do.
      await sql`alter table sandbox_workloads add column halted text[] not null default '{}'`.execute(db);
    },
  },
};
