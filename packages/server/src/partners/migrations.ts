import { type Kysely, type Migration, sql } from 'kysely';

export const partnerMigrations: Record<string, Migration> = {
  '0002_partners_create': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('partners')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('display_name', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('active', 'suspended')`))
        .addColumn('scopes', sql`text[]`, (c) => c.notNull())
        .addColumn('max_customers', 'integer', (c) => c.notNull())
        .addColumn('max_projects_per_customer', 'integer', (c) => c.notNull())
        .addColumn('max_open_operations', 'integer', (c) => c.notNull())
        .addColumn('usage_window_days', 'integer', (c) => c.notNull())
        .addColumn('rate_limit_per_minute', 'integer', (c) => c.notNull())
        .addColumn('rate_limit_burst', 'integer', (c) => c.notNull())
        .addColumn('allow_private_webhooks', 'boolean', (c) => c.notNull().defaultTo(false))
        .addColumn('default_plan_id', 'text', (c) => c.notNull())
        .addColumn('grace_days', 'integer', (c) => c.notNull())
        .addColumn('customer_count', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('ready_at', 'timestamptz', (c) => c.notNull())
        .addColumn('suspended_at', 'timestamptz')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull())
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
        .execute();
    },
  },
  '0007_partners_test_mode': {
    async up(db: Kysely<unknown>) {
      await sql`alter table partners add column test_customer_count integer not null default 0`.execute(db);
      await sql`alter table partners add column test_clock_offset_ms bigint not null default 0`.execute(db);
    },
  },
  // Numbered in issue 18's range so that it sorts after the provisioning core's migrations.
  '0170_partners_managed_by': {
    async up(db: Kysely<unknown>) {
      // `<namespace>/<name>` of the Kube-DC Partner resource that manages the partner (tenantry serve --watch-partners).
      await sql`alter table partners add column managed_by text`.execute(db);
    },
  },
};
