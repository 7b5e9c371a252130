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
  '0019_users_uid': {
    async up(db: Kysely<unknown>) {
      // A user's immutable identity: console links and sessions name it, so a replacement user
      // who reuses a username is another person (partner-api.md, States rule 4).
      await sql`alter table users add column uid text`.execute(db);
      await sql`update users set uid = 'usr_' || replace(gen_random_uuid()::text, '-', '')`.execute(db);
      await sql`alter table users alter column uid set not null`.execute(db);
      await sql`alter table users add constraint users_uid_key unique (uid)`.execute(db);
    },
  },
};
