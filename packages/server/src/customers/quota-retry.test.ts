import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import type { OrganizationRef, Platform, PlatformContext, QuotaSpec } from '../platform/platform.ts';

const REFUSED = 25;

/**
 * Quota changes reach the platform through a sweep. A platform that keeps refusing some customers' quotas
 * (an RBAC gap, a GPU profile it does not know) must not starve everyone else's changes, nor be asked again
 * at every engine pass: a refused revision waits 1 s, doubling, while other customers' changes go through.
 */
for (const target of testDatabases()) {
  describe(`quota changes the platform refuses [${target.name}]`, () => {
    let server: TestServer;
    let tokens: Tokens;
    const refused = new Set<string>();
    const calls = new Map<string, number>();

    before(async () => {
      server = await startTestServer(target, {
        livePlatform: (sandbox) =>
          new Proxy(sandbox, {
            get(target, property) {
              if (property === 'applyQuota')
                return async (ctx: PlatformContext, org: OrganizationRef, quota: QuotaSpec) => {
                  calls.set(org.customerId, (calls.get(org.customerId) ?? 0) + 1);
                  if (refused.has(org.customerId))
                    return { state: 'failed', code: 'UPSTREAM_403', message: 'quota objects are forbidden' } as const;
                  return target.applyQuota(ctx, org, quota);
                };
              const value = Reflect.get(target, property);
              return typeof value === 'function' ? value.bind(target) : value;
            },
          }) as Platform,
      });
      tokens = await partnerWithModes(server, 'quotas', {
        limits: { max_open_operations: 100, rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 },
      });
      for (let i = 0; i < REFUSED; i++) await activeCustomer(server, tokens.live, `refused-${i}`);
      await activeCustomer(server, tokens.live, 'fine');
    });
    after(() => server.stop());

    /** Engine passes (each sweep takes at most 20 customers). */
    const passes = async (n: number) => {
      for (let i = 0; i < n; i++) await server.services.engine.runDue();
    };

    const changeQuota = async (id: string, vcpu: number) => {
      const read = await partnerApi<{ data: { revision: number; quota: Record<string, unknown> } }>(
        server,
        'GET',
        `/customers/${id}/quota`,
        {
          token: tokens.live,
        },
      );
      const put = await partnerApi(server, 'PUT', `/customers/${id}/quota`, {
        token: tokens.live,
        body: { revision: read.body.data.revision, quota: { ...read.body.data.quota, vcpu } },
      });
      assert.equal(put.status, 200, put.text);
    };

    test("refused customers are tried again with backoff, and another customer's change still reaches the platform", async () => {
      // The engine is driven here, pass by pass, on the test's clock.
      await server.services.engine.stop();
      for (let i = 0; i < REFUSED; i++) refused.add(`refused-${i}`);
      calls.clear();
      for (let i = 0; i < REFUSED; i++) await changeQuota(`refused-${i}`, 3);
      await changeQuota('fine', 3);

      const ctx = { partnerId: 'quotas', mode: 'live' as const, now: server.clock.now() };
      // The sweep takes 20 customers a pass: the first pass tries 20 refused ones, the second the rest and `fine`.
      await passes(2);
      const applied = await server.services.sandbox.appliedQuota(ctx, { customerId: 'fine', organization: 'quotas-fine' });
      assert.equal(applied.quota.vcpu, 3, "the other customer's change is on the platform although 25 others keep failing");

      // Each refused customer was asked once; with the clock still, the engine's passes do not ask again.
      assert.deepEqual(new Set([...refused].map((id) => calls.get(id))), new Set([1]));
      await server.services.engine.runDue();
      assert.deepEqual(new Set([...refused].map((id) => calls.get(id))), new Set([1]), 'no retry before the backoff ends');

      // After the backoff (1 s), once more each; then the wait doubles.
      server.clock.advance(1_000);
      await passes(2);
      assert.deepEqual(new Set([...refused].map((id) => calls.get(id))), new Set([2]));
      server.clock.advance(1_000);
      await passes(2);
      assert.deepEqual(new Set([...refused].map((id) => calls.get(id))), new Set([2]), 'the second wait is 2 s');
      server.clock.advance(1_000);
      await passes(2);
      assert.deepEqual(new Set([...refused].map((id) => calls.get(id))), new Set([3]));
    });

    test('a new revision is tried at once, and a quota the platform takes again clears the backoff', async () => {
      refused.delete('refused-0');
      const before = calls.get('refused-0') ?? 0;
      await changeQuota('refused-0', 4);
      await server.services.engine.runDue();
      assert.equal(calls.get('refused-0'), before + 1, 'the new revision is tried in the next pass, not after the backoff');
      const ctx = { partnerId: 'quotas', mode: 'live' as const, now: server.clock.now() };
      const applied = await server.services.sandbox.appliedQuota(ctx, { customerId: 'refused-0', organization: 'quotas-refused-0' });
      assert.equal(applied.quota.vcpu, 4);
    });
  });
}
