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
  '0023_partners_customer_prefix': {
    async up(db: Kysely<unknown>) {
      // Kube-DC's customerIdPrefix: a partner's customers are named `<prefix>-<customer id>` on the platform,
      // so no two partners compete for a name. Existing partners get their id, cut to 22 characters.
      await sql`alter table partners add column customer_prefix text`.execute(db);
      await sql`update partners set customer_prefix = rtrim(left(id, 22), '-')`.execute(db);
      await sql`alter table partners alter column customer_prefix set not null`.execute(db);
      await sql`alter table partners add constraint partners_customer_prefix_key unique (customer_prefix)`.execute(db);
    },
  },
  '0042_partners_portal_contact_project': {
    async up(db: Kysely<unknown>) {
      // Kube-DC's Partner portalUrl, contactEmail and defaults.projectName, for partners set by the operator or a resource.
      await sql`alter table partners add column portal_url text`.execute(db);
      await sql`alter table partners add column contact_email text`.execute(db);
      await sql`alter table partners add column default_project text not null default 'default'`.execute(db);
    },
  },
  '0026_partners_managed_by': {
    async up(db: Kysely<unknown>) {
      // `<namespace>/<name>` of the Kube-DC Partner resource that manages the partner (tenantry serve --watch-partners).
      await sql`alter table partners add column managed_by text`.execute(db);
    },
  },
};
