import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { type Amount, amount, type CapacityView, type Quota } from '../../test/capacity-views.ts';
import { assertError, operatorApi, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, createCustomer, eventsOf, partnerWithModes, type Tokens } from '../../test/provisioning.ts';

for (const target of testDatabases()) {
  describe(`quota and plan changes [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    const api = <T = Record<string, unknown>>(token: string, method: string, path: string, body?: unknown) =>
      partnerApi<T>(server, method, path, { token, ...(body !== undefined ? { body } : {}) });
    const quotaOf = async (token: string, id: string) => {
      const result = await api<{ data: Quota }>(token, 'GET', `/customers/${id}/quota`);
      assert.equal(result.status, 200, result.text);
      return result.body.data;
    };
    const capacity = async (token: string) => (await api<{ data: CapacityView }>(token, 'GET', '/capacity')).body.data;
    const setCapacity = async (partner: string, body: Record<string, unknown>) => {
      const result = await operatorApi(server, 'PUT', `/partners/${partner}/capacity`, { body });
      assert.equal(result.status, 200, result.text);
    };

    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'cap');
    });
    after(() => server.stop());

    describe('PUT /customers/{id}/quota', () => {
      test('a change takes the next revision, moves the allocation and records customer.quota_changed', async () => {
        await activeCustomer(server, p.live, 'q1');
        const before = (await capacity(p.live)).pool.vcpu.allocated;
        const current = await quotaOf(p.live, 'q1');
        const changed = await api<{ data: Quota }>(p.live, 'PUT', '/customers/q1/quota', {
          revision: current.revision,
          quota: amount(6, 24, 100, { 'a100-40gb': 1 }),
          project_caps: { default: { vcpu: 4, gpus: { 'a100-40gb': 1 } } },
        });
        assert.equal(changed.status, 200, changed.text);
        assert.deepEqual(changed.body.data, {
          customer_id: 'q1',
          revision: current.revision + 1,
          quota: amount(6, 24, 100, { 'a100-40gb': 1 }),
          project_caps: { default: { vcpu: 4, gpus: { 'a100-40gb': 1 } } },
        });
        assert.deepEqual(await quotaOf(p.live, 'q1'), changed.body.data);
        const view = await capacity(p.live);
        assert.equal(view.pool.vcpu.allocated, before + 4);
        assert.equal(view.pool.gpus['a100-40gb']?.allocated, 1);
        const events = (await eventsOf(server, 'cap')).filter((e) => e.type === 'customer.quota_changed');
        assert.deepEqual(events.at(-1)?.data, { customer_id: 'q1', quota: changed.body.data });

        // Omitted caps stay; a stale revision is a CONFLICT naming the current one.
        const again = await api<{ data: Quota }>(p.live, 'PUT', '/customers/q1/quota', {
          revision: current.revision + 1,
          quota: amount(6, 24, 120, { 'a100-40gb': 1 }),
        });
        assert.deepEqual(again.body.data.project_caps, { default: { vcpu: 4, gpus: { 'a100-40gb': 1 } } });
        const stale = assertError(
          await api(p.live, 'PUT', '/customers/q1/quota', { revision: current.revision, quota: amount(1, 1, 1) }),
          409,
          'CONFLICT',
        );
        assert.deepEqual(stale.details, { customer_id: 'q1', revision: current.revision + 2, given: current.revision });
      });

      test('every capacity error names its dimensions; nothing is written', async () => {
        await activeCustomer(server, p.live, 'q2');
        const { revision } = await quotaOf(p.live, 'q2');
        const put = (quota: Amount, project_caps?: Record<string, unknown>) =>
          api(p.live, 'PUT', '/customers/q2/quota', { revision, quota, ...(project_caps ? { project_caps } : {}) });

        const caps = assertError(
          await put(amount(4, 8, 50), { default: { vcpu: 6, memory_gib: 9 }, web: { storage_gib: 51 } }),
          400,
          'QUOTA_EXCEEDED',
        );
        assert.deepEqual(caps.details?.violations, [
          { project: 'default', dimension: 'vcpu', cap: 6, quota: 4 },
          { project: 'default', dimension: 'memory_gib', cap: 9, quota: 8 },
          { project: 'web', dimension: 'storage_gib', cap: 51, quota: 50 },
        ]);
        const perCustomer = assertError(await put(amount(65, 8, 5000, { 'h100-80gb': 3 })), 409, 'CUSTOMER_CAPACITY_EXCEEDED');
        assert.deepEqual(perCustomer.details?.dimensions, [
          { dimension: 'vcpu', requested: 65, max: 64 },
          { dimension: 'storage_gib', requested: 5000, max: 4096 },
          { dimension: 'gpus.h100-80gb', requested: 3, max: 2 },
        ]);
        await setCapacity('cap', { pool: { memory_gib: 100 } });
        const view = await capacity(p.live);
        const pool = assertError(await put(amount(2, 100, 50)), 409, 'PARTNER_CAPACITY_EXCEEDED');
        assert.deepEqual(pool.details?.dimensions, [
          {
            dimension: 'memory_gib',
            requested: 100,
            available: view.pool.memory_gib.available + 8,
            total: 100,
            allocated: view.pool.memory_gib.allocated,
          },
        ]);
        await setCapacity('cap', { pool: { memory_gib: 4000 } });
        await operatorApi(server, 'PUT', '/partners/cap/gpu-profiles', { body: { profiles: ['a100-40gb', 'h100-80gb'] } });
        const profile = assertError(await put(amount(2, 8, 50, { 'l4-24gb': 1, 'a100-40gb': 1 })), 403, 'GPU_PROFILE_NOT_ALLOWED');
        assert.deepEqual(profile.details, { profiles: ['l4-24gb'], grantable: ['a100-40gb', 'h100-80gb'] });
        assert.equal((await quotaOf(p.live, 'q2')).revision, revision, 'no refused change was written');
        assertError(await api(p.live, 'PUT', '/customers/nobody/quota', { revision: 1, quota: amount(1, 1, 1) }), 404, 'NOT_FOUND');
        assertError(
          await api(p.live, 'PUT', '/customers/q2/quota', { revision: 1, quota: { vcpu: -1, memory_gib: 1, storage_gib: 1, gpus: {} } }),
          400,
          'VALIDATION_ERROR',
        );
      });

      test('GPU grants cannot drop below what running workloads use; unverifiable usage is 503 GPU_USAGE_UNAVAILABLE', async () => {
        await activeCustomer(server, p.test, 'g1');
        const grant = await api<{ data: Quota }>(p.test, 'PUT', '/customers/g1/quota', {
          revision: 1,
          quota: amount(8, 32, 100, { 'a100-40gb': 2 }),
        });
        assert.equal(grant.status, 200, grant.text);
        await api(p.test, 'PUT', '/test-helpers/customers/g1/workloads', { vms: ['trainer'], databases: [], gpus: { 'a100-40gb': 2 } });
        const blocked = assertError(
          await api(p.test, 'PUT', '/customers/g1/quota', { revision: 2, quota: amount(8, 32, 100, { 'a100-40gb': 1 }) }),
          409,
          'GPU_ENTITLEMENT_REDUCTION_BLOCKED',
        );
        assert.deepEqual(blocked.details, { blockers: [{ profile: 'a100-40gb', requested: 1, in_use: 2 }] });
        const byPlan = assertError(
          await api(p.test, 'PUT', '/customers/g1/plan', { plan_id: 'standard' }),
          409,
          'GPU_ENTITLEMENT_REDUCTION_BLOCKED',
        );
        assert.deepEqual(byPlan.details, {
          blockers: [{ profile: 'a100-40gb', requested: 0, in_use: 2 }],
          workloads: { vms: ['trainer'], databases: [] },
        });

        await api(p.test, 'POST', '/test-helpers/failures', { type: 'gpu_usage' });
        const unavailable = await api(p.test, 'PUT', '/customers/g1/quota', { revision: 2, quota: amount(8, 32, 100, { 'a100-40gb': 3 }) });
        assert.equal(unavailable.status, 200, 'a grant that only grows needs no usage check');
        const down = await api(p.test, 'PUT', '/customers/g1/quota', { revision: 3, quota: amount(8, 32, 100, { 'a100-40gb': 2 }) });
        assertError(down, 503, 'GPU_USAGE_UNAVAILABLE');
        assert.equal(down.headers.get('retry-after'), '5');
        const retried = await api(p.test, 'PUT', '/customers/g1/quota', { revision: 3, quota: amount(8, 32, 100, { 'a100-40gb': 2 }) });
        assert.equal(retried.status, 200, 'the injected failure was used up');
        // Stopped workloads hold no GPUs.
        await api(p.test, 'POST', '/customers/g1/suspend', {});
        assert.equal((await api(p.test, 'PUT', '/customers/g1/plan', { plan_id: 'standard' })).status, 200);
      });

      test('a customer still provisioning answers NOT_READY; one being deleted CONFLICT', async () => {
        await api(p.test, 'POST', '/test-helpers/failures', {
          type: 'customer.create',
          code: 'PROVISIONING_TIMEOUT',
          customer_id: 'slowq',
        });
        await createCustomer(server, p.test, 'slowq');
        assertError(await api(p.test, 'PUT', '/customers/slowq/quota', { revision: 1, quota: amount(1, 1, 1) }), 409, 'NOT_READY');
        await activeCustomer(server, p.live, 'goneq');
        await api(p.live, 'DELETE', '/customers/goneq?grace_days=3');
        assertError(await api(p.live, 'PUT', '/customers/goneq/quota', { revision: 1, quota: amount(1, 1, 1) }), 409, 'CONFLICT');
      });
    });

    describe('PUT /customers/{id}/plan', () => {
      test("the plan's quota replaces the quota (next revision), with customer.plan_changed and customer.quota_changed", async () => {
        await activeCustomer(server, p.live, 'pl1');
        const changed = await api<{ data: { customer_id: string; plan_id: string; plan: { quota: Amount } } }>(
          p.live,
          'PUT',
          '/customers/pl1/plan',
          {
            plan_id: 'performance',
          },
        );
        assert.equal(changed.status, 200, changed.text);
        assert.equal(changed.body.data.plan_id, 'performance');
        const quota = await quotaOf(p.live, 'pl1');
        assert.deepEqual([quota.revision, quota.quota], [2, amount(8, 32, 200)]);
        assert.equal((await api<{ data: { plan_id: string } }>(p.live, 'GET', '/customers/pl1')).body.data.plan_id, 'performance');
        const events = (await eventsOf(server, 'cap')).filter((e) => (e.data as { customer_id: string }).customer_id === 'pl1');
        assert.deepEqual(events.find((e) => e.type === 'customer.plan_changed')?.data, { customer_id: 'pl1', plan_id: 'performance' });
        assert.ok(events.some((e) => e.type === 'customer.quota_changed'));
        await operatorApi(server, 'PUT', '/partners/cap/plans', { body: { plans: ['standard', 'performance'] } });
        assertError(await api(p.live, 'PUT', '/customers/pl1/plan', { plan_id: 'gpu-a100' }), 403, 'PLAN_NOT_ALLOWED');
        assertError(await api(p.live, 'PUT', '/customers/pl1/plan', { plan_id: 'Not A Plan' }), 400, 'VALIDATION_ERROR');
      });
    });

    if (target.name === 'postgres') {
      test('a change that cannot take the capacity lock promptly answers 409 BUSY with Retry-After', async () => {
        await activeCustomer(server, p.live, 'busy1');
        const holder = new pg.Client({ connectionString: server.databaseUrl });
        await holder.connect();
        try {
          await holder.query('begin');
          await holder.query(`select * from capacity_allocations where partner_id = 'cap' and mode = 'live' for update`);
          const started = Date.now();
          const busy = await api(p.live, 'PUT', '/customers/busy1/quota', { revision: 1, quota: amount(3, 8, 50) });
          assertError(busy, 409, 'BUSY');
          assert.equal(busy.headers.get('retry-after'), '1');
          assert.ok(Date.now() - started < 2_000, 'answered promptly, without waiting for the lock');
          await holder.query('rollback');
          assert.equal((await api(p.live, 'PUT', '/customers/busy1/quota', { revision: 1, quota: amount(3, 8, 50) })).status, 200);
        } finally {
          await holder.end();
        }
      });
    }
  });
}
