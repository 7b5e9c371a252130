import { type Kysely, type Migration, sql } from 'kysely';

export const webhookMigrations: Record<string, Migration> = {
  '0015_webhooks_create': {
    async up(db: Kysely<unknown>) {
      // One receiver per partner and mode (test mode has its own, CONTRACT §5).
      await sql`
        create table webhooks (
          partner_id text not null references partners (id),
          mode text not null,
          url text not null,
          events text[] not null,
          enabled boolean not null,
          secret text not null,
          previous_secret_valid_until timestamptz,
          created_at timestamptz not null,
          updated_at timestamptz not null,
          primary key (partner_id, mode)
        )`.execute(db);

      // The outbox row is the delivery: its id is the delivery id, and these columns carry it
      // through its attempts. Events recorded before this migration are not delivered.
      await sql`alter table events add column delivery_state text not null default 'skipped'`.execute(db);
      await sql`alter table events alter column delivery_state set default 'pending'`.execute(db);
      await sql`alter table events add column delivery_attempts integer not null default 0`.execute(db);
      await sql`alter table events add column delivery_due_at timestamptz`.execute(db);
      await sql`alter table events add column delivery_lease_until timestamptz`.execute(db);
      await sql`alter table events add column signed_at bigint`.execute(db);
      await sql`alter table events add column signature text`.execute(db);
      await sql`create index events_delivery_due_idx on events (delivery_due_at nulls first, id) where delivery_state = 'pending'`.execute(
        db,
      );
      await sql`create index events_partner_type_idx on events (partner_id, mode, type, id)`.execute(db);
      await sql`create index events_created_idx on events (created_at)`.execute(db);

      // The delivery log: one row per attempt (and per test ping), the 50 most recent kept.
      await sql`
        create table webhook_attempts (
          seq bigint generated always as identity primary key,
          partner_id text not null,
          mode text not null,
          delivery_id text not null,
          event text not null,
          delivered boolean not null,
          attempt integer not null,
          status integer,
          error text,
          at timestamptz not null
        )`.execute(db);
      await sql`create index webhook_attempts_partner_idx on webhook_attempts (partner_id, mode, seq)`.execute(db);
    },
  },
  '0033_webhooks_leased_idx': {
    async up(db: Kysely<unknown>) {
      // Every claim counts each receiver's deliveries in flight; without this it walks the receiver's
      // whole backlog of pending rows.
      await sql`
        create index events_delivery_leased_idx on events (partner_id, mode)
        where delivery_state = 'pending' and delivery_lease_until is not null`.execute(db);
    },
  },
  '0040_webhooks_receiver_due_idx': {
    async up(db: Kysely<unknown>) {
      // The claim walks each receiver's pending deliveries in the order they are due. Without receiver
      // columns in that order's index, the planner walks the receiver's every event instead
      // (`events_partner_type_idx`, delivered ones included) and sorts what it keeps: thousands of pages
      // a claim under load. This one starts at the receiver's first row.
      await sql`
        create index events_delivery_receiver_due_idx on events (partner_id, mode, delivery_due_at nulls first, id)
        where delivery_state = 'pending'`.execute(db);
      await sql`drop index events_delivery_due_idx`.execute(db);
    },
  },
};
