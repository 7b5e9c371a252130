import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { testDatabases } from '../../test/harness.ts';
import { migrateToLatest } from '../infra/db/migrate.ts';
import { MIGRATIONS, migrate } from './database.ts';

/** The migrations a database of the release before the move of quotas and deliveries had run. */
const BEFORE_THE_MOVES = Object.fromEntries(Object.entries(MIGRATIONS).filter(([name]) => name < '0046'));

/**
 * An upgrade in place: a database that holds customers with quotas and events still to deliver, as the
 * release before kept them (quota columns on `customers`, delivery columns on `events`), migrated to this
 * release. Nothing a partner has, or is owed, may be lost on the way.
 */
for (const target of testDatabases()) {
  describe(`an upgrade of a database in use [${target.name}]`, () => {
    test("keeps every customer's plan and quota, and every delivery still under way", async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      const { db } = handle;
      await migrateToLatest(db, BEFORE_THE_MOVES);
      const at = new Date('2026-12-01T10:00:00.000Z');
      await sql`
        insert into partners (id, display_name, status, scopes, max_customers, max_projects_per_customer,
          max_open_operations, usage_window_days, rate_limit_per_minute, rate_limit_burst, default_plan_id,
          grace_days, ready_at, created_at, updated_at, customer_prefix)
        values ('acme', 'Acme', 'active', '{customers:read}', 10, 10, 20, 93, 120, 40, 'standard', 14, ${at}, ${at}, ${at}, 'acme')`.execute(
        db,
      );
      for (const [id, status, applied] of [
        ['globex', 'active', 3],
        ['initech', 'provisioning', null],
      ] as const) {
        await sql`
          insert into customers (uid, platform_scope, partner_id, mode, id, organization, status, plan_id, owner_username,
            owner_email, created_at, updated_at, quota, quota_revision, project_caps, quota_applied_revision,
            quota_retry_revision, quota_retry_count, quota_retry_problem)
          values (${`uid-${id}`}, 'live', 'acme', 'live', ${id}, ${`acme-${id}`}, ${status}, 'gpu', 'owner',
            'owner@example.com', ${at}, ${at}, '{"cpu": 8, "gpu": 1}'::jsonb, 4, '{"web": {"cpu": 2}}'::jsonb, ${applied},
            4, 2, 'the platform said no')`.execute(db);
      }
      await sql`
        insert into events (id, partner_id, mode, type, data, created_at, delivery_state, delivery_attempts, delivery_due_at, signed_at, signature)
        values
          ('dlv_pending', 'acme', 'live', 'customer.ready', '{"customer_id": "globex"}'::jsonb, ${at}, 'pending', 2, ${at}, 1796000000, 'v1=abc'),
          ('dlv_done', 'acme', 'live', 'customer.ready', '{"customer_id": "initech"}'::jsonb, ${at}, 'delivered', 1, null, null, null)`.execute(
        db,
      );

      await migrate(db);

      const quotas = await sql<Record<string, unknown>>`
        select customer_uid, plan_id, quota, quota_revision, project_caps, quota_applied_revision, quota_retry_revision,
               quota_retry_count, quota_retry_problem
          from customer_quotas order by customer_uid`.execute(db);
      assert.deepEqual(quotas.rows, [
        {
          customer_uid: 'uid-globex',
          plan_id: 'gpu',
          quota: { cpu: 8, gpu: 1 },
          quota_revision: 4,
          project_caps: { web: { cpu: 2 } },
          quota_applied_revision: 3,
          quota_retry_revision: 4,
          quota_retry_count: 2,
          quota_retry_problem: 'the platform said no',
        },
        // A customer still provisioning applies its quota with its creation: nothing is left for the sweep.
        {
          customer_uid: 'uid-initech',
          plan_id: 'gpu',
          quota: { cpu: 8, gpu: 1 },
          quota_revision: 4,
          project_caps: { web: { cpu: 2 } },
          quota_applied_revision: 4,
          quota_retry_revision: 4,
          quota_retry_count: 2,
          quota_retry_problem: 'the platform said no',
        },
      ]);
      const deliveries = await sql<Record<string, unknown>>`
        select id, partner_id, mode, type, data, state, attempts, signature from webhook_deliveries order by id`.execute(db);
      assert.deepEqual(deliveries.rows, [
        {
          id: 'dlv_pending',
          partner_id: 'acme',
          mode: 'live',
          type: 'customer.ready',
          data: { customer_id: 'globex' },
          state: 'pending',
          attempts: 2,
          signature: 'v1=abc',
        },
      ]);
      const events = await sql<{ id: string }>`select id from events order by id`.execute(db);
      assert.deepEqual(
        events.rows.map((row) => row.id),
        ['dlv_done', 'dlv_pending'],
        'the events themselves stay',
      );
    });
  });
}
