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
};
