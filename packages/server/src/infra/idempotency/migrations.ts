import { type Kysely, type Migration, sql } from 'kysely';

export const idempotencyMigrations: Record<string, Migration> = {
  '0006_idempotency_keys_create': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('partner_id', 'text', (c) => c.notNull())
        .addColumn('mode', 'text', (c) => c.notNull())
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('running', 'done')`))
        .addColumn('status_code', 'integer')
        .addColumn('body', 'text')
        .addColumn('request_id', 'text', (c) => c.notNull())
        .addColumn('locked_until', 'timestamptz', (c) => c.notNull())
        .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
        .addColumn('created_at', 'timestamptz', (c) => c.notNull())
        .addPrimaryKeyConstraint('idempotency_keys_pk', ['partner_id', 'mode', 'key'])
        .execute();
      await db.schema.createIndex('idempotency_keys_expires_at_idx').on('idempotency_keys').column('expires_at').execute();
    },
  },
};
