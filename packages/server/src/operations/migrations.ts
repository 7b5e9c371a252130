import { type Kysely, type Migration, sql } from 'kysely';

export const operationMigrations: Record<string, Migration> = {
  '0011_operations_create': {
    async up(db: Kysely<unknown>) {
      await sql`
        create table operations (
          id text primary key,
          partner_id text not null,
          mode text not null,
          type text not null check (type in ('customer.create', 'customer.delete', 'project.create', 'project.delete')),
          status text not null check (status in ('pending', 'running', 'succeeded', 'failed')),
          customer_uid text not null,
          customer_id text not null,
          project text,
          created_at timestamptz not null,
          updated_at timestamptz not null,
          finished_at timestamptz,
          error_code text,
          error_message text,
          due_at timestamptz not null
        )`.execute(db);
      // A customer's operations, newest first (ids sort by creation).
      await sql`create index operations_customer_idx on operations (customer_uid, id)`.execute(db);
      // Open operations: the engine's queue and the TOO_MANY_OPERATIONS count.
      await sql`create index operations_open_due_idx on operations (due_at) where status in ('pending', 'running')`.execute(db);
      await sql`create index operations_open_partner_idx on operations (partner_id, mode) where status in ('pending', 'running')`.execute(
        db,
      );
      await sql`create index operations_finished_idx on operations (finished_at) where finished_at is not null`.execute(db);
    },
  },
  '0022_operations_leases': {
    async up(db: Kysely<unknown>) {
      // The engine claims an operation with a lease, calls the platform with no transaction open, and
      // commits the outcome only while the lease is still its own.
      await sql`alter table operations add column lease_owner text`.execute(db);
      await sql`alter table operations add column lease_until timestamptz`.execute(db);
      await sql`alter table operations add column failed_looks integer not null default 0`.execute(db);
      await sql`alter table operations add column last_problem text`.execute(db);
      // A deleted customer's operations stay readable by its id for their 7 days.
      await sql`create index operations_partner_customer_idx on operations (partner_id, mode, customer_id, id)`.execute(db);
    },
  },
  '0037_operations_outcome_whole': {
    async up(db: Kysely<unknown>) {
      // The guard of an outcome recorded in one statement with what it announces: true,
      // or the statement fails (SQLSTATE TN001) and nothing it wrote stays. Volatile (the default), so
      // PostgreSQL never evaluates it at planning, only for the row that reaches it.
      await sql`
        create function operation_outcome_whole(recorded boolean, operation_id text) returns boolean
        language plpgsql volatile as $$
        begin
          if recorded then
            return true;
          end if;
          raise exception using
            errcode = 'TN001',
            message = format('the outcome of operation %s was not recorded whole; nothing of it was written', operation_id);
        end
        $$`.execute(db);
    },
  },
  '0044_operations_outcome_whole_dropped': {
    async up(db: Kysely<unknown>) {
      // Every outcome is recorded in the finishing transaction, which rolls back whole; nothing calls the guard.
      await sql`drop function if exists operation_outcome_whole(boolean, text)`.execute(db);
    },
  },
  '0053_operations_trace_parent': {
    async up(db: Kysely<unknown>) {
      // The request's trace context, for the looks (in any process) that carry the operation out.
      await sql`alter table operations add column trace_parent text`.execute(db);
    },
  },
};
