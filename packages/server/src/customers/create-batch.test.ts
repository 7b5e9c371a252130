import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { customerBody, partnerWithModes } from '../../test/provisioning.ts';

/**
 * A partner's concurrent creates commit together: each gets its own answer, as if it had come
 * alone in arrival order. A create refused by a check (its id taken by an earlier one, the partner's
 * maximum reached) fails alone; the others are written whole, counted once each and given their quota.
 */
for (const target of testDatabases()) {
  describe(`a burst of one partner's creates [${target.name}]`, () => {
    let server: TestServer;
    let token: string;
    before(async () => {
      server = await startTestServer(target);
      token = (await partnerWithModes(server, 'burst', { limits: { max_customers: 12, max_open_operations: 1000 } })).live;
    });
    after(() => server.stop());

    test('every create gets its own answer: ids taken twice answer 409 once, the maximum refuses only those past it', async () => {
      const ids = Array.from({ length: 16 }, (_, i) => `b${i % 10}`);
      const answers = await Promise.all(
        ids.map((id) => partnerApi<{ error?: { code: string } }>(server, 'POST', '/customers', { token, body: customerBody(id) })),
      );
      const codes = answers.map((a) => (a.status === 202 ? 'created' : (a.body.error?.code ?? String(a.status))));
      const created = answers.filter((a) => a.status === 202);
      assert.equal(created.length, 10, `each of the ten ids is created once: ${codes.join(',')}`);
      assert.deepEqual(new Set(codes), new Set(['created', 'ALREADY_EXISTS']));
      const more = await Promise.all(
        ['c1', 'c2', 'c3', 'c4'].map((id) =>
          partnerApi<{ error?: { code: string } }>(server, 'POST', '/customers', { token, body: customerBody(id) }),
        ),
      );
      assert.deepEqual(more.map((a) => (a.status === 202 ? 'created' : a.body.error?.code)).sort(), [
        'LIMIT_REACHED',
        'LIMIT_REACHED',
        'created',
        'created',
      ]);
      const whoami = await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token });
      assert.equal(whoami.body.data.customer_count, 12, 'each created customer counted once');
      const capacity = await partnerApi<{ data: { pool: { vcpu: { allocated: number } } } }>(server, 'GET', '/capacity', { token });
      const plans = await partnerApi<{ data: { id: string; quota: { vcpu: number } }[] }>(server, 'GET', '/catalog/plans', { token });
      const whoamiDefaults = await partnerApi<{ data: { defaults: { plan_id: string } } }>(server, 'GET', '/auth/whoami', { token });
      const plan = plans.body.data.find((p) => p.id === whoamiDefaults.body.data.defaults.plan_id);
      assert.ok(plan);
      assert.equal(capacity.body.data.pool.vcpu.allocated, 12 * plan.quota.vcpu, "the pool holds each created customer's quota once");
    });
  });
}
