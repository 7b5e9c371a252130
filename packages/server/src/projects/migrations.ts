import { type Kysely, type Migration, sql } from 'kysely';

export const projectMigrations: Record<string, Migration> = {
  '0009_projects_create': {
    async up(db: Kysely<unknown>) {
      await sql`
        create table projects (
          uid text primary key,
          customer_uid text not null references customers (uid) on delete cascade,
          platform_scope text not null,
          partner_id text not null,
          mode text not null,
          customer_id text not null,
          name text not null,
          state text not null check (state in ('provisioning', 'ready', 'failed', 'deleting')),
          namespace text not null,
          cidr text,
          created_at timestamptz not null,
          updated_at timestamptz not null,
          constraint projects_customer_name_key unique (customer_uid, name),
          constraint projects_scope_namespace_key unique (platform_scope, namespace)
        )`.execute(db);
    },
  },
};
