import { type Kysely, type Migration, sql } from 'kysely';

export const userMigrations: Record<string, Migration> = {
  '0010_users_create': {
    async up(db: Kysely<unknown>) {
      await sql`
        create table users (
          customer_uid text not null references customers (uid) on delete cascade,
          platform_scope text not null,
          partner_id text not null,
          mode text not null,
          customer_id text not null,
          username text not null,
          email text not null,
          email_key text not null,
          role text not null check (role in ('admin', 'member')),
          is_owner boolean not null,
          first_name text,
          last_name text,
          required_actions text[] not null default '{}',
          created_at timestamptz not null,
          constraint users_pkey primary key (customer_uid, username),
          constraint users_scope_email_key unique (platform_scope, email_key)
        )`.execute(db);
    },
  },
};
