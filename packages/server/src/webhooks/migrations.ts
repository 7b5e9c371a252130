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
  '0046_webhooks_deliveries': {
    async up(db: Kysely<unknown>) {
      // The delivery leaves the events table for a table of this module: one row per event a receiver
      // wants, carrying what it sends. Events no receiver wanted have no row.
      await sql`
        create table webhook_deliveries (
          id text primary key,
          partner_id text not null,
          mode text not null,
          type text not null,
          data jsonb not null,
          created_at timestamptz not null,
          state text not null default 'pending',
          attempts integer not null default 0,
          due_at timestamptz,
          lease_until timestamptz,
          signed_at bigint,
          signature text
        )`.execute(db);
      // The claim walks each receiver's pending deliveries in the order they are due, and counts those in flight.
      await sql`
        create index webhook_deliveries_due_idx on webhook_deliveries (partner_id, mode, due_at nulls first, id)
        where state = 'pending'`.execute(db);
      await sql`
        create index webhook_deliveries_leased_idx on webhook_deliveries (partner_id, mode)
        where state = 'pending' and lease_until is not null`.execute(db);
      // Retention drops finished deliveries by age.
      await sql`create index webhook_deliveries_created_idx on webhook_deliveries (created_at)`.execute(db);
      // Deliveries still under way carry on where they were; finished ones are history the API never
      // showed (the delivery log is `webhook_attempts`).
      await sql`
        insert into webhook_deliveries
          (id, partner_id, mode, type, data, created_at, state, attempts, due_at, lease_until, signed_at, signature)
        select id, partner_id, mode, type, data, created_at, delivery_state, delivery_attempts, delivery_due_at,
          delivery_lease_until, signed_at, signature
        from events where delivery_state = 'pending'`.execute(db);
    },
  },
  '0047_webhooks_events_columns_drop': {
    async up(db: Kysely<unknown>) {
      // Their indexes (`events_delivery_*`) go with them.
      await sql`
        alter table events
          drop column delivery_state, drop column delivery_attempts, drop column delivery_due_at,
          drop column delivery_lease_until, drop column signed_at, drop column signature`.execute(db);
    },
  },
  '0054_webhooks_deliveries_trace_parent': {
    async up(db: Kysely<unknown>) {
      // The trace context of what recorded the event (a request, an operation's look), for the attempts' spans.
      await sql`alter table webhook_deliveries add column trace_parent text`.execute(db);
    },
  },
};
