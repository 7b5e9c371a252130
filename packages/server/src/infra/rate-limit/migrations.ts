import type { Kysely, Migration } from 'kysely';

export const rateLimitMigrations: Record<string, Migration> = {
  '0005_rate_limits_create': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('rate_limits')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('tat_ms', 'float8', (c) => c.notNull())
        .addColumn('granted', 'integer', (c) => c.notNull().defaultTo(1))
        .execute();
    },
  },
};
