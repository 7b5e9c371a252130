import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Amount, amount, type CapacityView, type Quota } from '../../test/capacity-views.ts';
import { assertError, fieldErrors, operatorApi, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens, waitGone } from '../../test/provisioning.ts';

for (const target of testDatabases()) {
  describe(`quotas, plans and capacity [${target.name}]`, () => {
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

    describe('operator side', () => {
      test('the seeded catalogue has CPU-only and GPU plans; plans set creates and replaces, audited', async () => {
        const plans = (await operatorApi<{ data: { id: string; quota: Amount }[] }>(server, 'GET', '/plans')).body.data;
        assert.ok(plans.some((plan) => plan.id === 'standard' && Object.keys(plan.quota.gpus).length === 0));
        assert.ok(plans.some((plan) => Object.keys(plan.quota.gpus).length > 0));
        const set = await operatorApi<{ data: { id: string; display_name: string; quota: Amount } }>(server, 'PUT', '/plans/lab-xl', {
          body: { display_name: 'Lab XL', quota: amount(12, 48, 300, { 'a100-40gb': 2 }) },
        });
        assert.equal(set.status, 200, set.text);
        assert.deepEqual(set.body.data, { id: 'lab-xl', display_name: 'Lab XL', quota: amount(12, 48, 300, { 'a100-40gb': 2 }) });
        const unknown = assertError(
          await operatorApi(server, 'PUT', '/plans/bad', { body: { display_name: 'Bad', quota: amount(1, 1, 1, { 'tpu-v5': 1 }) } }),
          400,
          'VALIDATION_ERROR',
        );
        assert.ok((unknown.details?.known_gpu_profiles as string[] | undefined)?.includes('a100-40gb'));
        const audit = await operatorApi<{ data: { action: string; target: string }[] }>(server, 'GET', '/audit?limit=5');
        assert.ok(audit.body.data.some((entry) => entry.action === 'plan.set' && entry.target === 'plan/lab-xl'));
      });

      test('partners plans, gpu-profiles and capacity set change what the partner sees, each audited', async () => {
        const partner = await partnerWithModes(server, 'shaped');
        const plans = await operatorApi<{ data: { plans: string[] } }>(server, 'PUT', '/partners/shaped/plans', {
          body: { plans: ['standard', 'gpu-a100'] },
        });
        assert.deepEqual(plans.body.data.plans, ['gpu-a100', 'standard']);
        const catalog = await api<{ data: { id: string }[]; pagination: { next_cursor: string | null } }>(
          partner.live,
          'GET',
          '/catalog/plans?limit=1',
        );
        assert.deepEqual(
          catalog.body.data.map((plan) => plan.id),
          ['gpu-a100'],
        );
        const next = await api<{ data: { id: string }[]; pagination: { next_cursor: string | null } }>(
          partner.live,
          'GET',
          `/catalog/plans?limit=1&cursor=${encodeURIComponent(catalog.body.pagination.next_cursor ?? '')}`,
        );
        assert.deepEqual([next.body.data.map((plan) => plan.id), next.body.pagination.next_cursor], [['standard'], null]);

        await operatorApi(server, 'PUT', '/partners/shaped/gpu-profiles', { body: { profiles: ['a100-40gb'] } });
        await setCapacity('shaped', { pool: { vcpu: 40, gpus: { 'a100-40gb': 3 } }, per_customer_max: { vcpu: 20 } });
        const view = await capacity(partner.live);
        assert.deepEqual(view.pool.vcpu, { total: 40, allocated: 0, available: 40 });
        assert.deepEqual(view.pool.gpus['a100-40gb'], { total: 3, allocated: 0, available: 3 });
        assert.equal(view.per_customer_max.vcpu, 20);
        assert.deepEqual(
          view.gpu_profiles.map((g) => g.name),
          ['a100-40gb'],
        );
        assert.equal(view.gpu_profiles[0]?.memory_gib, 40);

        const badPlan = assertError(
          await operatorApi(server, 'PUT', '/partners/shaped/plans', { body: { plans: ['nope'] } }),
          400,
          'VALIDATION_ERROR',
        );
        assert.equal(fieldErrors(badPlan)[0]?.field, 'plans.0');
        assertError(
          await operatorApi(server, 'PUT', '/partners/shaped/gpu-profiles', { body: { profiles: ['tpu'] } }),
          400,
          'VALIDATION_ERROR',
        );
        assertError(await operatorApi(server, 'PUT', '/partners/ghost/capacity', { body: { pool: { vcpu: 1 } } }), 404, 'NOT_FOUND');
        const audit = await operatorApi<{ data: { action: string }[] }>(server, 'GET', '/audit?partner=shaped&limit=10');
        for (const action of ['partner.plans', 'partner.gpu_profiles', 'partner.capacity']) {
          assert.ok(
            audit.body.data.some((entry) => entry.action === action),
            action,
          );
        }
      });
    });

    describe('creation allocates the plan from the pool', () => {
      test("a customer holds its plan's quota from creation; deletion returns it", async () => {
        const before = await capacity(p.live);
        await activeCustomer(server, p.live, 'alloc', { plan_id: 'performance' });
        const quota = await quotaOf(p.live, 'alloc');
        assert.deepEqual(quota, { customer_id: 'alloc', revision: 1, quota: amount(8, 32, 200), project_caps: {} });
        const during = await capacity(p.live);
        assert.equal(during.pool.vcpu.allocated, before.pool.vcpu.allocated + 8);
        assert.equal((await capacity(p.test)).pool.vcpu.allocated, 0, 'test mode allocates apart');
        const plan = await api<{ data: { plan_id: string; plan: { quota: Amount } } }>(p.live, 'GET', '/customers/alloc/plan');
        assert.equal(plan.body.data.plan_id, 'performance');
        await api(p.live, 'DELETE', '/customers/alloc?mode=immediate');
        await waitGone(server, p.live, '/customers/alloc');
        assert.equal((await capacity(p.live)).pool.vcpu.allocated, before.pool.vcpu.allocated);
      });

      test('creation refuses a plan not allowed, a GPU profile not grantable, and a pool that is full', async () => {
        const t = await partnerWithModes(server, 'tight');
        await operatorApi(server, 'PUT', '/partners/tight/plans', { body: { plans: ['standard', 'gpu-h100'] } });
        await operatorApi(server, 'PUT', '/partners/tight/gpu-profiles', { body: { profiles: ['a100-40gb'] } });
        const body = (id: string, plan_id: string) => ({ id, owner: { username: 'o', email: `o@${id}.example` }, plan_id });
        const notAllowed = assertError(await api(t.live, 'POST', '/customers', body('t-a', 'performance')), 403, 'PLAN_NOT_ALLOWED');
        assert.deepEqual(notAllowed.details, { plan_id: 'performance', allowed: ['gpu-h100', 'standard'] });
        const gpu = assertError(await api(t.live, 'POST', '/customers', body('t-b', 'gpu-h100')), 403, 'GPU_PROFILE_NOT_ALLOWED');
        assert.deepEqual(gpu.details?.profiles, ['h100-80gb']);
        await setCapacity('tight', { pool: { vcpu: 3 } });
        await activeCustomer(server, t.live, 't-c');
        const full = assertError(await api(t.live, 'POST', '/customers', body('t-d', 'standard')), 409, 'PARTNER_CAPACITY_EXCEEDED');
        assert.deepEqual(full.details?.dimensions, [{ dimension: 'vcpu', requested: 2, available: 1, total: 3, allocated: 2 }]);
        assertError(await api(t.live, 'GET', '/customers/t-d'), 404, 'NOT_FOUND');
      });
    });

    describe('usage', () => {
      test('usage accrues from running workloads on the test clock, exactly, and the window is bounded', async () => {
        // A partner of its own, so the list holds exactly its two customers.
        const p = await partnerWithModes(server, 'usage');
        await activeCustomer(server, p.test, 'u1');
        await activeCustomer(server, p.test, 'u2');
        const now = await api<{ data: { now: string } }>(p.test, 'POST', '/test-helpers/clock/advance', { seconds: 1 });
        assert.equal(now.status, 200, now.text);
        const today = Date.parse(now.body.data.now.slice(0, 10));
        const day = (offsetDays: number) => new Date(today + offsetDays * 86_400_000).toISOString().slice(0, 10);
        // 2 VMs (2 vCPU, 4 GiB, 20 GiB each) and a database (1, 2, 10) with one GPU: 5 vCPU, 10 GiB, 50 GiB.
        await api(p.test, 'PUT', '/test-helpers/customers/u1/workloads', { vms: ['a', 'b'], databases: ['db'], gpus: { 'a100-40gb': 1 } });
        await api(p.test, 'POST', '/test-helpers/clock/advance', { seconds: 7200 });
        await api(p.test, 'POST', '/customers/u1/suspend', {});
        await api(p.test, 'POST', '/test-helpers/clock/advance', { seconds: 3600 });
        await api(p.test, 'POST', '/customers/u1/resume', {});
        await api(p.test, 'POST', '/test-helpers/clock/advance', { seconds: 1800 });
        const window = `from=${day(-1)}&to=${day(2)}`;
        const one = await api<{ data: Record<string, unknown> }>(p.test, 'GET', `/customers/u1/usage?${window}`);
        assert.equal(one.status, 200, one.text);
        assert.deepEqual(one.body.data, {
          customer_id: 'u1',
          deleted_at: null,
          from: day(-1),
          to: day(2),
          vcpu_hours: 12.5,
          memory_gib_hours: 25,
          storage_gib_hours: 125,
          gpu_hours: { 'a100-40gb': 2.5 },
        });
        const list = await api<{ data: { customer_id: string; vcpu_hours: number }[]; pagination: { next_cursor: string | null } }>(
          p.test,
          'GET',
          `/usage?${window}&limit=1`,
        );
        assert.deepEqual(
          list.body.data.map((r) => [r.customer_id, r.vcpu_hours]),
          [['u1', 12.5]],
        );
        const second = await api<{ data: { customer_id: string; vcpu_hours: number }[] }>(
          p.test,
          'GET',
          `/usage?${window}&limit=1&cursor=${encodeURIComponent(list.body.pagination.next_cursor ?? '')}`,
        );
        assert.deepEqual(
          second.body.data.map((r) => [r.customer_id, r.vcpu_hours]),
          [['u2', 0]],
        );
        // A window before the workloads existed has none.
        assert.equal(
          (await api<{ data: { vcpu_hours: number } }>(p.test, 'GET', `/customers/u1/usage?from=${day(-5)}&to=${day(-1)}`)).body.data
            .vcpu_hours,
          0,
        );

        const tooLong = assertError(await api(p.test, 'GET', `/usage?from=${day(-200)}&to=${day(1)}`), 400, 'VALIDATION_ERROR');
        assert.equal(tooLong.details?.max_usage_window_days, 93);
        assertError(await api(p.test, 'GET', '/usage?from=2026-02-30'), 400, 'VALIDATION_ERROR');
        assertError(await api(p.test, 'GET', `/usage?from=${day(1)}&to=${day(0)}`), 400, 'VALIDATION_ERROR');
        assertError(await api(p.live, 'GET', '/customers/u1/usage'), 404, 'NOT_FOUND');
      });

      test('GET /usage also lists the customers deleted within the window, with their usage until deletion and deleted_at', async () => {
        const p = await partnerWithModes(server, 'billed');
        await activeCustomer(server, p.test, 'gone');
        await activeCustomer(server, p.test, 'kept');
        const start = await api<{ data: { now: string } }>(p.test, 'POST', '/test-helpers/clock/advance', { seconds: 1 });
        const today = Date.parse(start.body.data.now.slice(0, 10));
        const day = (offsetDays: number) => new Date(today + offsetDays * 86_400_000).toISOString().slice(0, 10);
        await api(p.test, 'PUT', '/test-helpers/customers/gone/workloads', { vms: ['vm'], databases: [], gpus: {} });
        await api(p.test, 'POST', '/test-helpers/clock/advance', { seconds: 3600 });
        // Its workloads go first (a live VM blocks deletion), then the customer, immediately.
        await api(p.test, 'PUT', '/test-helpers/customers/gone/workloads', { vms: [], databases: [], gpus: {} });
        assert.equal((await api(p.test, 'DELETE', '/customers/gone?mode=immediate')).status, 202);
        await api(p.test, 'POST', '/test-helpers/clock/advance', { seconds: 3600 });
        assertError(await api(p.test, 'GET', '/customers/gone'), 404, 'NOT_FOUND');
        const list = await api<{ data: { customer_id: string; vcpu_hours: number; deleted_at: string | null }[] }>(
          p.test,
          'GET',
          `/usage?from=${day(-1)}&to=${day(2)}`,
        );
        assert.deepEqual(
          list.body.data.map((r) => [r.customer_id, r.vcpu_hours, r.deleted_at !== null]),
          [
            ['gone', 2, true],
            ['kept', 0, false],
          ],
          'the deleted customer is billed for the hour its VM ran',
        );
        // Its operations, the outcome of its deletion included, stay readable by its id.
        const ops = await api<{ data: { type: string; status: string }[] }>(p.test, 'GET', '/customers/gone/operations');
        assert.equal(ops.status, 200, ops.text);
        assert.deepEqual(
          ops.body.data.map((o) => [o.type, o.status]),
          [
            ['customer.delete', 'succeeded'],
            ['customer.create', 'succeeded'],
          ],
        );
      });

      test("whoami's limits are the values enforced: the usage window follows the operator's change", async () => {
        const p = await partnerWithModes(server, 'window');
        const changed = await operatorApi(server, 'PATCH', '/partners/window', { body: { limits: { max_usage_window_days: 10 } } });
        assert.equal(changed.status, 200, changed.text);
        // Every process notices a partner change within its cache's 2 s.
        server.clock.advance(3_000);
        const whoami = await api<{ data: { limits: { max_usage_window_days: number } } }>(p.live, 'GET', '/auth/whoami');
        assert.equal(whoami.body.data.limits.max_usage_window_days, 10);
        const tooLong = assertError(await api(p.live, 'GET', '/usage?from=2026-01-01&to=2026-01-12'), 400, 'VALIDATION_ERROR');
        assert.equal(tooLong.details?.max_usage_window_days, 10);
        assert.equal((await api(p.live, 'GET', '/usage?from=2026-01-01&to=2026-01-11')).status, 200);
      });
    });
  });
}
