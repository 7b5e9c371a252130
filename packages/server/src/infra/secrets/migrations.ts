import { type Kysely, type Migration, sql } from 'kysely';

export const secretMigrations: Record<string, Migration> = {
  '0001_secrets_create': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('server_secrets')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(db.fn('now')))
        .execute();
    },
  },
  '0018_secrets_sealed': {
    async up(db: Kysely<unknown>) {
      // The cursor signing key was kept in plain text; cursors are now encrypted with a new, sealed key.
      await sql`delete from server_secrets where name = 'cursor_signing_key'`.execute(db);
    },
  },
};
