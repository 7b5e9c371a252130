import { type Kysely, type Migration, sql } from 'kysely';

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
  /**
   * Buckets are not worth a write-ahead log record: a commit that changed only an unlogged table does
   * not wait for the log to reach the disk, and every token exchange (and a quiet partner's every
   * request) reserves from a bucket. After a crash PostgreSQL empties the table: every bucket starts
   * full, as after a restart of the embedded database.
   */
  '0035_rate_limits_unlogged': {
    async up(db: Kysely<unknown>) {
      await sql`alter table rate_limits set unlogged`.execute(db);
    },
  },
};
