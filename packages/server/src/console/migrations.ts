import { type Kysely, type Migration, sql } from 'kysely';

export const consoleMigrations: Record<string, Migration> = {
  '0014_console_create': {
    async up(db: Kysely<unknown>) {
      // Only hashes are stored: a database read does not give a working login link or session.
      await sql`
        create table console_logins (
          token_hash text primary key,
          partner_id text not null,
          mode text not null,
          customer_uid text not null,
          username text not null,
          expires_at timestamptz not null,
          used_at timestamptz,
          created_at timestamptz not null
        )`.execute(db);
      await sql`
        create table console_sessions (
          id_hash text primary key,
          partner_id text not null,
          mode text not null,
          customer_uid text not null,
          username text not null,
          expires_at timestamptz not null,
          created_at timestamptz not null
        )`.execute(db);
    },
  },
};
