import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, fieldErrors, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import {
  activeCustomer,
  createCustomer,
  eventsOf,
  partnerWithModes,
  type Tokens,
  waitForOperation,
  waitGone,
} from '../../test/provisioning.ts';

for (const target of testDatabases()) {
  describe(`test mode and its helpers [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    before(async () => {
      // Realistic sandbox timing: only the test clock (or the server's) moves provisioning on.
      server = await startTestServer(target, { env: { TENANTRY_SANDBOX_DELAY_MS: '3000' } });
      p = await partnerWithModes(server, 'tester');
    });
    after(() => server.stop());

    const advance = async (seconds: number) => {
      const result = await partnerApi<{ data: { now: string; offset_seconds: number } }>(server, 'POST', '/test-helpers/clock/advance', {
        token: p.test,
        body: { seconds },
      });
      assert.equal(result.status, 200, result.text);
      return result.body.data;
    };
    const inject = (body: Record<string, unknown>) => partnerApi(server, 'POST', '/test-helpers/failures', { token: p.test, body });

    test('every helper answers 404 NOT_FOUND to a live token, even with a bad body', async () => {
      for (const [method, path] of [
        ['POST', '/test-helpers/failures'],
        ['PUT', '/test-helpers/customers/x/workloads'],
        ['PUT', '/test-helpers/customers/x/users/y/required-actions'],
        ['POST', '/test-helpers/clock/advance'],
        ['POST', '/test-helpers/clock/reset'],
      ] as const) {
        assertError(await partnerApi(server, method, path, { token: p.live, body: { nonsense: true } }), 404, 'NOT_FOUND');
      }
    });

    test('clock/advance moves the test clock only: test provisioning completes, live stays put', async () => {
      const testOp = await createCustomer(server, p.test, 'clocked');
      const liveOp = await createCustomer(server, p.live, 'clocked');
      const moved = await advance(3);
      assert.equal(moved.offset_seconds, 3);
      assert.equal(moved.now, new Date(server.clock.nowMs() + 3000).toISOString());
      const testDone = await waitForOperation(server, p.test, 'clocked', testOp.operation.id);
      assert.equal(testDone.status, 'succeeded');
      assert.equal(testDone.finished_at, moved.now, 'test-mode timestamps follow the test clock');
      const live = await partnerApi<{ data: { status: string; finished_at: string | null } }>(
        server,
        'GET',
        `/customers/clocked/operations/${liveOp.operation.id}`,
        {
          token: p.live,
        },
      );
      assert.equal(live.body.data.finished_at, null, 'live mode follows the server clock: still provisioning');
      assert.equal((await eventsOf(server, 'tester', 'test')).filter((e) => e.type === 'customer.ready').length, 1);
      assert.equal((await eventsOf(server, 'tester', 'live')).length, 0, 'test events never mix with live ones');
    });

    test('an injected failure fails the next matching creation with its code, once', async () => {
      assert.equal((await inject({ type: 'customer.create', code: 'UPSTREAM_422', customer_id: 'broken' })).status, 201);
      const other = await createCustomer(server, p.test, 'not-matching');
      const broken = await createCustomer(server, p.test, 'broken');
      await advance(3);
      assert.equal((await waitForOperation(server, p.test, 'not-matching', other.operation.id)).status, 'succeeded');
      const failed = await waitForOperation(server, p.test, 'broken', broken.operation.id);
      assert.equal(failed.status, 'failed');
      assert.deepEqual(failed.error, { code: 'UPSTREAM_422', message: 'The platform refused a provisioning step with HTTP 422.' });
      const customer = await partnerApi<{ data: { status: string; projects: { state: string }[] } }>(server, 'GET', '/customers/broken', {
        token: p.test,
      });
      assert.equal(customer.body.data.status, 'failed');
      assert.equal(customer.body.data.projects[0]?.state, 'failed');
      const event = (await eventsOf(server, 'tester', 'test')).find((e) => e.type === 'customer.failed');
      assert.equal(event?.data.customer_id, 'broken');
      assert.equal(event?.data.state, 'failed');
      assert.deepEqual(event?.data.error, failed.error);

      // A failed customer can be deleted; an immediate delete tears it down.
      await partnerApi(server, 'DELETE', '/customers/broken?mode=immediate', { token: p.test });
      await advance(60);
      await waitGone(server, p.test, '/customers/broken');

      await inject({ type: 'project.create', code: 'PROVISIONING_FAILED', message: 'disk on fire' });
      const project = await partnerApi<{ data: { operation: { id: string } } }>(server, 'POST', '/customers/not-matching/projects', {
        token: p.test,
        body: { name: 'burns' },
      });
      await advance(2);
      const projectOp = await waitForOperation(server, p.test, 'not-matching', project.body.data.operation.id);
      assert.deepEqual(projectOp.error, { code: 'PROVISIONING_FAILED', message: 'disk on fire' });
    });

    test('PROVISIONING_TIMEOUT: the operation hangs until 15 minutes have passed on the test clock', async () => {
      await inject({ type: 'customer.create', code: 'PROVISIONING_TIMEOUT' });
      const { operation } = await createCustomer(server, p.test, 'stuck');
      await advance(14 * 60 + 59);
      const running = await partnerApi<{ data: { status: string } }>(server, 'GET', `/customers/stuck/operations/${operation.id}`, {
        token: p.test,
      });
      assert.equal(running.body.data.status, 'running');
      await advance(1);
      const failed = await waitForOperation(server, p.test, 'stuck', operation.id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error?.code, 'PROVISIONING_TIMEOUT');
    });

    test('workloads block deletion (listed in details), count in workloads_running, and stop with suspension', async () => {
      await createCustomer(server, p.test, 'busy');
      await advance(3);
      await partnerApi(server, 'GET', '/customers/busy/operations', { token: p.test });
      const set = await partnerApi<{ data: Record<string, unknown> }>(server, 'PUT', '/test-helpers/customers/busy/workloads', {
        token: p.test,
        body: { vms: ['vm-1', 'vm-2'], databases: ['pg-main'], gpus: { 'a100-40gb': 1 } },
      });
      assert.equal(set.status, 200, set.text);
      assert.equal(set.body.data.running, true);
      const blocked = assertError(await partnerApi(server, 'DELETE', '/customers/busy', { token: p.test }), 409, 'CONFLICT');
      assert.deepEqual(blocked.details?.vms, ['vm-1', 'vm-2']);
      assert.deepEqual(blocked.details?.databases, ['pg-main']);
      const suspended = await partnerApi<{ data: { workloads_running: number } }>(server, 'POST', '/customers/busy/suspend', {
        token: p.test,
      });
      assert.equal(suspended.body.data.workloads_running, 0);
      const resumed = await partnerApi<{ data: { workloads_running: number } }>(server, 'POST', '/customers/busy/resume', {
        token: p.test,
        body: {},
      });
      assert.equal(resumed.body.data.workloads_running, 3, 'two VMs and a database run again');
      await partnerApi(server, 'PUT', '/test-helpers/customers/busy/workloads', { token: p.test, body: {} });
      assert.equal((await partnerApi(server, 'DELETE', '/customers/busy?grace_days=2', { token: p.test })).status, 202);
      await advance(2 * 24 * 3600);
      const deleting = await partnerApi<{ data: { status: string } }>(server, 'GET', '/customers/busy', { token: p.test });
      assert.equal(deleting.body.data.status, 'deleting', 'the grace period ended on the test clock; teardown takes 60 s more');
      await advance(60);
      await waitGone(server, p.test, '/customers/busy');
    });

    test('helper input is validated like every other body; a failure takes one of two forms, told apart by type', async () => {
      const refused = async (body: Record<string, unknown>) => fieldErrors(assertError(await inject(body), 400, 'VALIDATION_ERROR'));
      assert.deepEqual(await refused({ type: 'customer.create' }), [{ in: 'body', field: 'code', message: 'is required' }]);
      assert.deepEqual(await refused({ type: 'gpu_usage', code: 'PROVISIONING_FAILED' }), [
        { in: 'body', field: 'code', message: 'is not a known field' },
      ]);
      assert.deepEqual(await refused({ code: 'PROVISIONING_FAILED' }), [{ in: 'body', field: 'type', message: 'is required' }]);
      assert.deepEqual(await refused({ type: 'vm.create', code: 'PROVISIONING_FAILED' }), [
        { in: 'body', field: 'type', message: 'is not one of the allowed values' },
      ]);
      assert.deepEqual(await refused({ type: 7 }), [{ in: 'body', field: 'type', message: 'must be a string' }]);
      assertError(await inject({ type: 'customer.create', code: 'CUSTOMER_DELETED' }), 400, 'VALIDATION_ERROR');
      assert.equal((await inject({ type: 'gpu_usage', count: 2 })).status, 201);
      assertError(
        await partnerApi(server, 'POST', '/test-helpers/clock/advance', { token: p.test, body: { seconds: -5 } }),
        400,
        'VALIDATION_ERROR',
      );
      assertError(
        await partnerApi(server, 'PUT', '/test-helpers/customers/nobody/workloads', { token: p.test, body: { vms: [] } }),
        404,
        'NOT_FOUND',
      );
    });

    test('clock/advance processes what falls due in time order: 900 s after a create, provisioning has succeeded; a grace period and teardown each happen at their time, with their events', async () => {
      const { customer, operation } = await createCustomer(server, p.test, 'ordered');
      const createdAt = Date.parse(String(customer.created_at));
      await advance(900);
      const done = await waitForOperation(server, p.test, 'ordered', operation.id);
      assert.equal(done.status, 'succeeded', 'the 3 s step happened before the 15-minute deadline was checked');
      assert.equal(done.finished_at, new Date(createdAt + 3000).toISOString(), 'finished when the sandbox delay ended');

      const scheduled = await partnerApi<{ data: { scheduled_deletion_at: string } }>(server, 'DELETE', '/customers/ordered?grace_days=1', {
        token: p.test,
      });
      assert.equal(scheduled.status, 202, scheduled.text);
      const graceEnds = Date.parse(scheduled.body.data.scheduled_deletion_at);
      await advance(2 * 86_400);
      await waitGone(server, p.test, '/customers/ordered');
      const events = (await eventsOf(server, 'tester', 'test')).filter((e) => e.data.customer_id === 'ordered');
      assert.deepEqual(
        events.map((e) => [e.type, new Date(e.created_at).toISOString()]),
        [
          ['customer.ready', new Date(createdAt + 3000).toISOString()],
          ['customer.deletion_scheduled', new Date(createdAt + 900_000).toISOString()],
          // Teardown starts when the grace period ends and takes the sandbox's 60 s.
          ['customer.deleted', new Date(graceEnds + 60_000).toISOString()],
        ],
      );
      const ops = await partnerApi<{ data: { type: string; created_at: string; finished_at: string }[] }>(
        server,
        'GET',
        '/customers/ordered/operations',
        { token: p.test },
      );
      const teardown = ops.body.data.find((o) => o.type === 'customer.delete');
      assert.equal(teardown?.created_at, new Date(graceEnds).toISOString(), 'the teardown opened when the grace period ended');
    });
  });

  describe(`test mode with no sandbox delay [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    test('a test key sees only test data, a live key only live data', async () => {
      const p = await partnerWithModes(server, 'modes');
      await activeCustomer(server, p.test, 'sandboxed');
      assertError(await partnerApi(server, 'GET', '/customers/sandboxed', { token: p.live }), 404, 'NOT_FOUND');
      const whoamiTest = await partnerApi<{ data: { customer_count: number; token: { mode: string } } }>(server, 'GET', '/auth/whoami', {
        token: p.test,
      });
      assert.equal(whoamiTest.body.data.customer_count, 1);
      assert.equal(whoamiTest.body.data.token.mode, 'test');
      const whoamiLive = await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token: p.live });
      assert.equal(whoamiLive.body.data.customer_count, 0);
    });
  });
}
