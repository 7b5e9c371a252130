import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import {
  activeCustomer,
  createCustomer,
  customerBody,
  eventsOf,
  eventually,
  partnerWithModes,
  refreshTokens,
  type Tokens,
  waitForOperation,
  waitGone,
} from '../../test/provisioning.ts';

const DAY_S = 24 * 3600;

for (const target of testDatabases()) {
  describe(`customer suspension and deletion [${target.name}]`, () => {
    let server: TestServer;
    let acme: Tokens;
    before(async () => {
      server = await startTestServer(target);
      acme = await partnerWithModes(server, 'acme');
    });
    after(() => server.stop());

    test('suspend and resume: state, workloads_running, one event per change, repeats are harmless', async () => {
      await activeCustomer(server, acme.live, 'soylent');
      const suspended = await partnerApi<{ data: Record<string, unknown> }>(server, 'POST', '/customers/soylent/suspend', {
        token: acme.live,
        body: { reason: 'unpaid invoice' },
      });
      assert.equal(suspended.status, 200, suspended.text);
      assert.equal(suspended.body.data.status, 'suspended');
      assert.equal(suspended.body.data.workloads_running, 0);
      assert.equal(suspended.body.data.suspended_at, server.clock.now().toISOString());
      const again = await partnerApi(server, 'POST', '/customers/soylent/suspend', { token: acme.live });
      assert.equal(again.status, 200);
      const read = await partnerApi<{ data: Record<string, unknown> }>(server, 'GET', '/customers/soylent', { token: acme.live });
      assert.equal(read.body.data.suspension_reason, 'unpaid invoice');
      const conflict = assertError(
        await partnerApi(server, 'POST', '/customers/soylent/projects', { token: acme.live, body: { name: 'more' } }),
        409,
        'CONFLICT',
      );
      assert.equal(conflict.details?.status, 'suspended');
      assertError(
        await partnerApi(server, 'POST', '/customers/soylent/users', {
          token: acme.live,
          body: { username: 'bob', email: 'bob@soylent.example' },
        }),
        409,
        'CONFLICT',
      );
      const resumed = await partnerApi<{ data: Record<string, unknown> }>(server, 'POST', '/customers/soylent/resume', {
        token: acme.live,
      });
      assert.equal(resumed.status, 200, resumed.text);
      assert.deepEqual(resumed.body.data, {
        customer_id: 'soylent',
        status: 'active',
        workloads_running: 0,
        cancelled_scheduled_deletion: false,
      });
      const types = (await eventsOf(server, 'acme')).filter((e) => e.data.customer_id === 'soylent').map((e) => e.type);
      assert.deepEqual(types, ['customer.ready', 'customer.suspended', 'customer.resumed']);
      const event = (await eventsOf(server, 'acme')).find((e) => e.type === 'customer.suspended');
      assert.deepEqual(Object.keys(event?.data ?? {}).sort(), ['customer_id', 'state', 'suspended_at', 'workloads_running']);
    });

    test('scheduled deletion: grace days, resume cancels it, teardown at the end of the grace period, then 404', async () => {
      await activeCustomer(server, acme.live, 'wonka');
      const scheduled = await partnerApi<{ data: Record<string, unknown> }>(server, 'DELETE', '/customers/wonka', { token: acme.live });
      assert.equal(scheduled.status, 202, scheduled.text);
      assert.equal(scheduled.body.data.status, 'deletion_scheduled');
      assert.equal(scheduled.body.data.grace_days, 14, "the partner's default grace days");
      assert.equal(scheduled.body.data.recoverable, true);
      assert.equal(scheduled.body.data.scheduled_deletion_at, new Date(server.clock.nowMs() + 14 * DAY_S * 1000).toISOString());
      const resumed = await partnerApi<{ data: Record<string, unknown> }>(server, 'POST', '/customers/wonka/resume', { token: acme.live });
      assert.equal(resumed.body.data.cancelled_scheduled_deletion, true);
      assert.equal(resumed.body.data.status, 'active');
      // The event says the same as the answer; the customer keeps nothing of the deletion it cancelled.
      const event = (await eventsOf(server, 'acme')).filter((e) => e.type === 'customer.resumed' && e.data.customer_id === 'wonka');
      assert.deepEqual(
        event.map((e) => e.data),
        [{ customer_id: 'wonka', state: 'active', workloads_running: 0, cancelled_scheduled_deletion: true }],
      );
      const cancelled = await partnerApi<{ data: Record<string, unknown> }>(server, 'GET', '/customers/wonka', { token: acme.live });
      assert.equal(cancelled.body.data.scheduled_deletion_at, null);

      const again = await partnerApi<{ data: Record<string, unknown> }>(server, 'DELETE', '/customers/wonka?grace_days=1', {
        token: acme.live,
      });
      assert.equal(again.body.data.grace_days, 1);
      server.clock.advance(DAY_S * 1000 + 1000);
      await refreshTokens(server, acme);
      await waitGone(server, acme.live, '/customers/wonka');
      const events = (await eventsOf(server, 'acme')).filter((e) => e.data.customer_id === 'wonka');
      assert.deepEqual(
        events.map((e) => e.type),
        ['customer.ready', 'customer.deletion_scheduled', 'customer.resumed', 'customer.deletion_scheduled', 'customer.deleted'],
      );
      assert.deepEqual(events.at(-1)?.data, { customer_id: 'wonka', immediate: false });
      assert.deepEqual(Object.keys(events[1]?.data ?? {}).sort(), [
        'customer_id',
        'grace_days',
        'recoverable',
        'scheduled_deletion_at',
        'state',
      ]);
    });

    test('immediate deletion: gone after teardown with its event and count; the id can be reused as a new customer', async () => {
      await activeCustomer(server, acme.live, 'tyrell');
      const before = (await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token: acme.live })).body.data
        .customer_count;
      const deleted = await partnerApi<{ data: Record<string, unknown> }>(server, 'DELETE', '/customers/tyrell?mode=immediate', {
        token: acme.live,
      });
      assert.equal(deleted.status, 202, deleted.text);
      assert.equal(deleted.body.data.recoverable, false);
      assert.match(String(deleted.body.data.operation_id), /^op_/);
      // The deleted customer's operations stay readable by its id: its teardown's outcome too.
      const teardown = await waitForOperation(server, acme.live, 'tyrell', String(deleted.body.data.operation_id));
      assert.deepEqual([teardown.type, teardown.status, teardown.error], ['customer.delete', 'succeeded', null]);
      await waitGone(server, acme.live, '/customers/tyrell');
      const events = (await eventsOf(server, 'acme')).filter((e) => e.data.customer_id === 'tyrell');
      assert.deepEqual(events.at(-1)?.data, { customer_id: 'tyrell', immediate: true });
      await eventually(
        () => partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token: acme.live }),
        (r) => r.body.data.customer_count === before - 1,
      );
      assertError(
        await partnerApi(server, 'DELETE', '/customers/tyrell?mode=immediate&grace_days=3', { token: acme.live }),
        400,
        'VALIDATION_ERROR',
      );

      const { operation } = await createCustomer(server, acme.live, 'tyrell');
      const ops = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/customers/tyrell/operations', { token: acme.live });
      assert.deepEqual(
        ops.body.data.map((o) => o.id),
        [operation.id],
        'a replacement customer is a separate resource',
      );
    });
  });

  describe(`customers while provisioning takes time [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    before(async () => {
      server = await startTestServer(target, { env: { TENANTRY_SANDBOX_DELAY_MS: '3000' } });
      p = await partnerWithModes(server, 'slowpoke', {
        limits: { max_open_operations: 2, rate_limit_per_minute: 10_000, rate_limit_burst: 1000 },
      });
    });
    after(() => server.stop());

    test('NOT_READY while provisioning; TOO_MANY_OPERATIONS past the open-operation limit; done after the sandbox delay', async () => {
      const first = await createCustomer(server, p.live, 'slow-a');
      await createCustomer(server, p.live, 'slow-b');
      const busy = await partnerApi(server, 'POST', '/customers', { token: p.live, body: customerBody('slow-c') });
      const error = assertError(busy, 429, 'TOO_MANY_OPERATIONS');
      assert.deepEqual(error.details, { open: 2, max: 2 });
      assert.equal(busy.headers.get('retry-after'), '3');
      // Refused whole: its customer and its operation (written before the count) are not kept.
      assertError(await partnerApi(server, 'GET', '/customers/slow-c', { token: p.live }), 404, 'NOT_FOUND');
      const again = await partnerApi(server, 'POST', '/customers', { token: p.live, body: customerBody('slow-d') });
      assert.deepEqual(assertError(again, 429, 'TOO_MANY_OPERATIONS').details, { open: 2, max: 2 }, 'the refused operation is not counted');

      const notReady = assertError(await partnerApi(server, 'POST', '/customers/slow-a/suspend', { token: p.live }), 409, 'NOT_READY');
      assert.equal(notReady.details?.status, 'provisioning');
      assertError(await partnerApi(server, 'POST', '/customers/slow-a/projects', { token: p.live, body: { name: 'x' } }), 409, 'NOT_READY');
      assertError(await partnerApi(server, 'DELETE', '/customers/slow-a', { token: p.live }), 409, 'NOT_READY');

      // The engine has looked (running: the platform said "not before the delay ends") and waits for it.
      const readOps = () => partnerApi<{ data: { status: string }[] }>(server, 'GET', '/customers/slow-a/operations', { token: p.live });
      await eventually(readOps, (r) => r.body.data[0]?.status === 'running');
      server.clock.advance(2_999);
      await server.services.engine.runDue();
      assert.equal((await readOps()).body.data[0]?.status, 'running', 'still provisioning one millisecond before the delay ends');
      server.clock.advance(1);
      const done = await waitForOperation(server, p.live, 'slow-a', first.operation.id);
      assert.equal(done.status, 'succeeded');
      assert.equal(done.finished_at, server.clock.now().toISOString(), 'finished when the delay ended');
    });

    test('an immediate delete during provisioning fails the creation with CUSTOMER_DELETING, then removes the customer', async () => {
      const { operation } = await createCustomer(server, p.live, 'doomed');
      const deleted = await partnerApi<{ data: { status: string } }>(server, 'DELETE', '/customers/doomed?mode=immediate', {
        token: p.live,
      });
      assert.equal(deleted.status, 202, deleted.text);
      const failed = await waitForOperation(server, p.live, 'doomed', operation.id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error?.code, 'CUSTOMER_DELETING');
      server.clock.advance(60_000);
      await waitGone(server, p.live, '/customers/doomed');
      const events = (await eventsOf(server, 'slowpoke')).filter((e) => e.data.customer_id === 'doomed');
      assert.deepEqual(
        events.map((e) => e.type),
        ['customer.failed', 'customer.deleted'],
      );
      assert.equal((events[0]?.data.project as { state: string } | null)?.state, 'failed', 'its first project failed with it');
    });
  });
}
