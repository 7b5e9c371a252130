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
      // The list order (customer id) and its two filters, each a keyset walk on one index.
      await sql`create index customers_list_idx on customers (partner_id, mode, id)`.execute(db);
      await sql`create index customers_external_id_idx on customers (partner_id, mode, external_id, id)`.execute(db);
      await sql`create index customers_status_idx on customers (partner_id, mode, status, id)`.execute(db);
      // The engine's scan for grace periods that ended.
      await sql`create index customers_scheduled_deletion_idx on customers (scheduled_deletion_at) where status = 'deletion_scheduled'`.execute(
        db,
      );
    },
  },
};
