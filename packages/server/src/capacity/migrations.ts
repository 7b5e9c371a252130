import { type Kysely, type Migration, sql } from 'kysely';

/** The catalogue the embedded default starts with (CONTRACT §3: CPU-only and GPU plans). */
const GPU_PROFILES = [
  ['a100-40gb', 'NVIDIA A100 40 GB', 40],
  ['a100-80gb', 'NVIDIA A100 80 GB', 80],
  ['h100-80gb', 'NVIDIA H100 80 GB', 80],
  ['l4-24gb', 'NVIDIA L4 24 GB', 24],
] as const;

const PLANS = [
  ['starter', 'Starter', 1, 2, 20, {}],
  ['standard', 'Standard', 2, 8, 50, {}],
  ['performance', 'Performance', 8, 32, 200, {}],
  ['gpu-l4', 'GPU L4', 8, 32, 200, { 'l4-24gb': 1 }],
  ['gpu-a100', 'GPU A100', 16, 128, 500, { 'a100-40gb': 1 }],
  ['gpu-h100', 'GPU H100', 32, 256, 1000, { 'h100-80gb': 1 }],
] as const;

export const capacityMigrations: Record<string, Migration> = {
  '0016_capacity_create': {
    async up(db: Kysely<unknown>) {
      await sql`create table gpu_profiles (name text primary key, display_name text not null, memory_gib integer not null)`.execute(db);
      for (const [name, display, memory] of GPU_PROFILES) {
        await sql`insert into gpu_profiles values (${name}, ${display}, ${memory})`.execute(db);
      }
      await sql`
        create table plans (
          id text primary key,
          display_name text not null,
          quota jsonb not null,
          created_at timestamptz not null default now(),
          updated_at timestamptz not null default now()
        )`.execute(db);
      for (const [id, display, vcpu, memory, storage, gpus] of PLANS) {
        const quota = JSON.stringify({ vcpu, memory_gib: memory, storage_gib: storage, gpus });
        await sql`insert into plans (id, display_name, quota) values (${id}, ${display}, ${quota}::jsonb)`.execute(db);
      }
      // A partner's settings; a partner without a row has the defaults (capacity/defaults.ts).
      await sql`
        create table partner_capacity (
          partner_id text primary key references partners (id),
          pool jsonb,
          per_customer_max jsonb,
          plans text[],
          gpu_profiles text[],
          updated_at timestamptz not null
        )`.execute(db);
      // What the customers of a partner and mode hold: the lock every capacity change takes.
      await sql`
        create table capacity_allocations (
          partner_id text not null references partners (id),
          mode text not null,
          allocated jsonb not null,
          primary key (partner_id, mode)
        )`.execute(db);
      await sql`alter table customers add column quota jsonb not null default '{"vcpu":0,"memory_gib":0,"storage_gib":0,"gpus":{}}'`.execute(
        db,
      );
      await sql`alter table customers add column quota_revision integer not null default 1`.execute(db);
      await sql`alter table customers add column project_caps jsonb not null default '{}'`.execute(db);
      // Customers from before: their plan's quota, allocated from their partner's pool.
      await sql`update customers c set quota = p.quota from plans p where p.id = c.plan_id`.execute(db);
      const holders = await sql<{ partner_id: string; mode: string; quota: Record<string, unknown> }>`
        select partner_id, mode, quota from customers`.execute(db);
      const sums = new Map<string, { vcpu: number; memory_gib: number; storage_gib: number; gpus: Record<string, number> }>();
      for (const { partner_id, mode, quota } of holders.rows) {
        const key = `${partner_id}\u0000${mode}`;
        const sum = sums.get(key) ?? { vcpu: 0, memory_gib: 0, storage_gib: 0, gpus: {} };
        const q = quota as { vcpu: number; memory_gib: number; storage_gib: number; gpus: Record<string, number> };
        sum.vcpu += q.vcpu;
        sum.memory_gib += q.memory_gib;
        sum.storage_gib += q.storage_gib;
        for (const [profile, n] of Object.entries(q.gpus)) sum.gpus[profile] = (sum.gpus[profile] ?? 0) + n;
        sums.set(key, sum);
      }
      for (const [key, sum] of sums) {
        const [partnerId, mode] = key.split('\u0000');
        await sql`insert into capacity_allocations values (${partnerId}, ${mode}, ${JSON.stringify(sum)}::jsonb)`.execute(db);
      }
    },
  },
  '0038_capacity_arithmetic': {
    async up(db: Kysely<unknown>) {
      // Capacity arithmetic in SQL, for a create that takes its quota out of the pool in one statement.
      // Each is the SQL twin of resources.ts (`add`; `assertPoolFits` with nothing held before), and a
      // test holds them equal. Resources are `{vcpu, memory_gib, storage_gib, gpus}`.
      // PL/pgSQL, not SQL: PostgreSQL inlines no SQL function whose body has a subquery, and plans such a
      // function again at every call (0.2-0.3 ms each, measured), where PL/pgSQL keeps its plans.
      await sql`
        create function resources_add(a jsonb, b jsonb) returns jsonb
        language plpgsql immutable as $$
        begin
          return jsonb_build_object(
            'vcpu', (a ->> 'vcpu')::numeric + (b ->> 'vcpu')::numeric,
            'memory_gib', (a ->> 'memory_gib')::numeric + (b ->> 'memory_gib')::numeric,
            'storage_gib', (a ->> 'storage_gib')::numeric + (b ->> 'storage_gib')::numeric,
            'gpus', coalesce(
              (select jsonb_object_agg(profile, n)
                 from (select profile, sum(n) as n
                         from (select key as profile, value::numeric as n from jsonb_each_text(a -> 'gpus')
                               union all
                               select key, value::numeric from jsonb_each_text(b -> 'gpus')) as parts
                        group by profile) as sums
                where n <> 0),
              '{}'::jsonb));
        end
        $$`.execute(db);
      // Whether a new holder's quota fits in what the pool has left: every dimension it wants (above
      // zero) at most the pool's total less what is allocated.
      await sql`
        create function resources_fit(pool jsonb, allocated jsonb, wanted jsonb) returns boolean
        language plpgsql immutable as $$
        begin
          return not exists (
            select
              from (select value::numeric as n,
                           coalesce((pool ->> key)::numeric, 0) as total,
                           coalesce((allocated ->> key)::numeric, 0) as held
                      from jsonb_each_text(wanted - 'gpus')
                    union all
                    select value::numeric,
                           coalesce((pool -> 'gpus' ->> key)::numeric, 0),
                           coalesce((allocated -> 'gpus' ->> key)::numeric, 0)
                      from jsonb_each_text(wanted -> 'gpus')) as dimensions
             where n > 0 and held + n > total);
        end
        $$`.execute(db);
    },
  },
  '0045_capacity_arithmetic_dropped': {
    async up(db: Kysely<unknown>) {
      // Capacity arithmetic is resources.ts alone; the create functions that used these are gone.
      await sql`drop function if exists resources_add(jsonb, jsonb)`.execute(db);
      await sql`drop function if exists resources_fit(jsonb, jsonb, jsonb)`.execute(db);
    },
  },
  '0048_customer_quotas_create': {
    async up(db: Kysely<unknown>) {
      // A customer's plan and quota live in capacity's own table: capacity decides them (the quota and
      // plan changes, a creation's plan, the sweep that applies them). The row goes before its customer.
      await sql`
        create table customer_quotas (
          customer_uid text primary key references customers (uid),
          plan_id text not null,
          quota jsonb not null,
          quota_revision integer not null,
          project_caps jsonb not null,
          quota_applied_revision integer,
          quota_retry_revision integer,
          quota_retry_at timestamptz,
          quota_retry_count integer not null default 0,
          quota_retry_problem text
        )`.execute(db);
      // A creation applies its customer's first revision itself: only a later one is the sweep's, so a
      // customer still provisioning (or that failed) counts as applied.
      await sql`
        insert into customer_quotas
        select uid, plan_id, quota, quota_revision, project_caps,
               case when status in ('provisioning', 'failed') then quota_revision else quota_applied_revision end,
               quota_retry_revision, quota_retry_at, quota_retry_count, quota_retry_problem
          from customers`.execute(db);
      await sql`
        create index customer_quotas_pending_idx on customer_quotas (customer_uid)
         where quota_applied_revision is distinct from quota_revision`.execute(db);
    },
  },
};
