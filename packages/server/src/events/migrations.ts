import { type Kysely, type Migration, sql } from 'kysely';

export const eventMigrations: Record<string, Migration> = {
  '0012_events_create': {
    async up(db: Kysely<unknown>) {
      // The outbox: written in the transaction of the change it reports, delivered later.
      await sql`
        create table events (
          id text primary key,
          partner_id text not null,
          mode text not null,
          type text not null,
          data jsonb not null,
          created_at timestamptz not null
        )`.execute(db);
      await sql`create index events_partner_idx on events (partner_id, mode, id)`.execute(db);
    },
  },
};
