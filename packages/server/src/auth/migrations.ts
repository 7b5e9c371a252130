import { type Kysely, type Migration, sql } from 'kysely';

export const authMigrations: Record<string, Migration> = {
  '0003_api_keys_create': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('api_keys')
        .addColumn('kid', 'text', (c) => c.primaryKey())
        .addColumn('partner_id', 'text', (c) => c.notNull().references('partners.id'))
        .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('live', 'test')`))
        .addColumn('secret_hash', 'text', (c) => c.notNull())
        .addColumn('allow_cidrs', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
        .addColumn('expires_at', 'timestamptz')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull())
        .addColumn('revoked_at', 'timestamptz')
        .addColumn('last_used_at', 'timestamptz')
        .execute();
      await db.schema.createIndex('api_keys_partner_id_idx').on('api_keys').columns(['partner_id', 'created_at']).execute();
    },
  },
};
