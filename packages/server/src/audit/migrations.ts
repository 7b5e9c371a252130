import type { Kysely, Migration } from 'kysely';

export const auditMigrations: Record<string, Migration> = {
  '0004_audit_log_create': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('audit_log')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('at', 'timestamptz', (c) => c.notNull())
        .addColumn('actor', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('partner_id', 'text')
        .addColumn('target', 'text', (c) => c.notNull())
        .addColumn('before', 'jsonb')
        .addColumn('after', 'jsonb')
        .addColumn('request_id', 'text', (c) => c.notNull())
        .execute();
      // Newest first, overall and per partner; ids sort by time.
      await db.schema.createIndex('audit_log_partner_id_idx').on('audit_log').columns(['partner_id', 'id']).execute();
    },
  },
};
