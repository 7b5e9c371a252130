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
  '0020_console_person_bound': {
    async up(db: Kysely<unknown>) {
      // Links and sessions named (customer, username); they now name the user's immutable id. The
      // old ones cannot be told apart from a namesake's, so they end here: users log in again.
      await sql`delete from console_logins`.execute(db);
      await sql`delete from console_sessions`.execute(db);
      for (const table of ['console_logins', 'console_sessions']) {
        await sql`alter table ${sql.table(table)} drop column username`.execute(db);
        await sql`alter table ${sql.table(table)} add column user_uid text not null`.execute(db);
        await sql`create index ${sql.raw(`${table}_user_idx`)} on ${sql.table(table)} (user_uid)`.execute(db);
        await sql`create index ${sql.raw(`${table}_customer_idx`)} on ${sql.table(table)} (customer_uid)`.execute(db);
        await sql`create index ${sql.raw(`${table}_partner_idx`)} on ${sql.table(table)} (partner_id)`.execute(db);
      }
      await sql`alter table console_sessions add column csrf_token text not null`.execute(db);
    },
  },
  '0031_console_vms': {
    async up(db: Kysely<unknown>) {
      // What the console's users asked for when they created VMs (the platform holds the VMs themselves).
      await sql`
        create table console_vms (
          customer_uid text not null,
          namespace text not null,
          name text not null,
          os_name text not null,
          vcpu integer not null,
          memory_gib integer not null,
          storage_gib integer not null,
          created_by text not null,
          created_at timestamptz not null,
          primary key (customer_uid, namespace, name)
        )`.execute(db);
    },
  },
};
