import type { Kysely, Migration } from 'kysely';

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
};
