import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type TestServer, testDatabases } from '../../test/harness.ts';
import {
  activeCustomer,
  createCustomer,
  eventually,
  partnerWithModes,
  refreshTokens,
  type Tokens,
  waitForOperation,
} from '../../test/provisioning.ts';
import { dns, type EventBody, useWebhookWorld } from '../../test/webhook-fixture.ts';
import { verifyDelivery, type WebhookReceiver } from '../../test/webhook-receiver.ts';

for (const target of testDatabases()) {
  describe(`webhooks: delivery [${target.name}]`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    let lab: Tokens;
    let plain: Tokens;
    const { api, configure, deliveries, received, settled, secretOf } = useWebhookWorld(target, (world) => {
      ({ server, receiver, lab, plain } = world);
    });

    test('each event kind arrives signed as the spec says, with its data fields, and equals its GET /events body', async () => {
      const secret = await secretOf(lab.live, receiver.url());
      const start = receiver.deliveries.length;
      const failing = 'kinds-fail';
      await activeCustomer(server, lab.live, 'kinds', { project: 'web' });
      await api(lab.live, 'POST', '/customers/kinds/suspend', { reason: 'unpaid' });
      await api(lab.live, 'POST', '/customers/kinds/resume', {});
      const project = await api<{ data: { operation: { id: string } } }>(lab.live, 'POST', '/customers/kinds/projects', { name: 'api' });
      await waitForOperation(server, lab.live, 'kinds', project.body.data.operation.id);
      await api(lab.live, 'DELETE', '/customers/kinds/projects/api');
      await api(lab.live, 'DELETE', '/customers/kinds?mode=scheduled&grace_days=3');
      // customer.failed through the live mode: an address pool cannot run dry on demand there, so
      // the test mode's failure injection drives it with a test-mode receiver.
      await api(lab.test, 'DELETE', '/webhook');
      const testSecret = (await configure(lab.test, { url: receiver.url('/test-mode') })).signing_secret ?? '';
      await api(lab.test, 'POST', '/test-helpers/failures', { type: 'customer.create', code: 'UPSTREAM_422', message: 'refused' });
      const failed = await createCustomer(server, lab.test, failing);
      await waitForOperation(server, lab.test, failing, failed.operation.id);
      const tp = await createCustomer(server, lab.test, 'kinds-test');
      await waitForOperation(server, lab.test, 'kinds-test', tp.operation.id);
      await api(lab.test, 'POST', '/test-helpers/failures', { type: 'project.create', code: 'NO_ADDRESS_SPACE' });
      const doomed = await api<{ data: { operation: { id: string } } }>(lab.test, 'POST', '/customers/kinds-test/projects', {
        name: 'doomed',
      });
      await waitForOperation(server, lab.test, 'kinds-test', doomed.body.data.operation.id);
      await api(lab.test, 'DELETE', '/customers/kinds-test?mode=immediate');

      const expected = {
        'customer.ready': ['customer_id', 'operation_id', 'project', 'state', 'error'],
        'customer.suspended': ['customer_id', 'state', 'suspended_at', 'workloads_running'],
        'customer.resumed': ['customer_id', 'state', 'workloads_running', 'cancelled_scheduled_deletion'],
        'project.ready': ['customer_id', 'operation_id', 'project', 'state', 'error'],
        'project.deleted': ['customer_id', 'project'],
        'customer.deletion_scheduled': ['customer_id', 'state', 'scheduled_deletion_at', 'grace_days', 'recoverable'],
        'customer.failed': ['customer_id', 'operation_id', 'project', 'state', 'error'],
        'project.failed': ['customer_id', 'operation_id', 'project', 'state', 'error'],
        'customer.deleted': ['customer_id', 'immediate'],
      } as const;
      const live = await received((d) => d.path === '/hooks' && d.body.data.customer_id === 'kinds', 6);
      const test = await received((d) => d.path === '/test-mode', 4);
      await eventually(
        async () => receiver.deliveries.slice(start),
        (all) => Object.keys(expected).every((event) => all.some((d) => d.body.event === event)),
      );
      const all = receiver.deliveries.slice(start);
      for (const [event, fields] of Object.entries(expected)) {
        const delivery = all.find((d) => d.body.event === event);
        assert.ok(delivery, `${event} delivered`);
        const fromTest = delivery.path === '/test-mode';
        assert.equal(
          verifyDelivery(delivery, [fromTest ? testSecret : secret], server.clock.nowMs()),
          fromTest ? testSecret : secret,
          event,
        );
        assert.deepEqual(Object.keys(delivery.body), ['id', 'event', 'created_at', 'partner_id', 'data']);
        assert.equal(delivery.body.partner_id, 'lab');
        assert.match(delivery.body.id, /^dlv_[0-9a-z]{26}$/);
        assert.equal(delivery.headers['x-service-event'], event);
        assert.equal(delivery.headers['x-service-delivery'], delivery.body.id);
        assert.equal(delivery.headers['content-type'], 'application/json');
        assert.deepEqual(Object.keys(delivery.body.data).sort(), [...fields].sort(), event);
      }
      const failure = all.find((d) => d.body.event === 'customer.failed');
      assert.deepEqual(failure?.body.data.error, { code: 'UPSTREAM_422', message: 'refused' });
      assert.equal(all.find((d) => d.body.event === 'customer.deleted')?.body.data.immediate, true);

      // The polling twin: GET /events lists the same bodies, byte for byte.
      const listed = await api<{ data: EventBody[] }>(lab.live, 'GET', '/events?limit=200');
      for (const delivery of live) {
        const twin = listed.body.data.find((e) => e.id === delivery.body.id);
        assert.equal(JSON.stringify(twin), delivery.raw.toString('utf8'));
      }
      const testListed = await api<{ data: EventBody[] }>(lab.test, 'GET', '/events?limit=200');
      assert.ok(test.every((d) => testListed.body.data.some((e) => e.id === d.body.id)));
      assert.ok(!listed.body.data.some((e) => test.some((d) => d.body.id === e.id)), 'test events stay in test mode');
    });

    test('the filter chooses what is sent; disabled delivery sends nothing', async () => {
      await secretOf(lab.live, receiver.url('/filtered'), ['project.*']);
      await activeCustomer(server, lab.live, 'filtered');
      const second = await api<{ data: { operation: { id: string } } }>(lab.live, 'POST', '/customers/filtered/projects', { name: 'p1' });
      await waitForOperation(server, lab.live, 'filtered', second.body.data.operation.id);
      await received((d) => d.path === '/filtered' && d.body.event === 'project.ready' && d.body.data.customer_id === 'filtered');
      assert.deepEqual(
        receiver.deliveries.filter((d) => d.path === '/filtered').map((d) => d.body.event),
        ['project.ready'],
        'customer.ready is not in project.*',
      );
      const tail = receiver.deliveries.length;
      await configure(lab.live, { url: receiver.url('/filtered'), enabled: false });
      await api(lab.live, 'POST', '/customers/filtered/suspend', {});
      const project = await api<{ data: { operation: { id: string } } }>(lab.live, 'POST', '/customers/filtered/projects', {
        name: 'p2',
      });
      assert.equal(project.status, 409, 'suspended');
      await api(lab.live, 'POST', '/customers/filtered/resume', {});
      // The events are recorded and listable, but nothing waits to deliver them.
      await eventually(
        async () => server.database.db.selectFrom('webhook_deliveries').select('state').where('partner_id', '=', 'lab').execute(),
        (rows) => rows.every((r) => r.state !== 'pending'),
      );
      assert.equal(
        receiver.deliveries.slice(tail).filter((d) => d.path === '/filtered').length,
        0,
        'customer events are filtered and delivery is disabled',
      );
      assert.ok((await api<{ data: EventBody[] }>(lab.live, 'GET', '/events?type=customer.resumed')).body.data.length > 0);
    });

    test('only events that wait for a delivery wake the dispatcher: a partner without a receiver never does', async () => {
      let wakes = 0;
      const stop = server.services.webhooks.onQueued(() => {
        wakes += 1;
      });
      try {
        const quiet = await partnerWithModes(server, 'quiet');
        await activeCustomer(server, quiet.live, 'hush'); // customer.ready, recorded by the operation's finish
        assert.equal((await api(quiet.live, 'POST', '/customers/hush/suspend', {})).status, 200); // recorded by the request
        const recorded = await api<{ data: EventBody[] }>(quiet.live, 'GET', '/events');
        assert.deepEqual(recorded.body.data.map((e) => e.event).sort(), ['customer.ready', 'customer.suspended']);
        assert.equal(wakes, 0, 'events no receiver wants wake nothing');
        const queued = await server.database.db.selectFrom('webhook_deliveries').select('id').where('partner_id', '=', 'quiet').execute();
        assert.deepEqual(queued, [], 'and leave no delivery waiting');

        await secretOf(lab.live, receiver.url('/woken'));
        await activeCustomer(server, lab.live, 'woken');
        assert.equal(wakes, 1, "customer.ready's delivery wakes the dispatcher when its operation's finish commits");
        assert.equal((await api(lab.live, 'POST', '/customers/woken/suspend', {})).status, 200);
        assert.equal(wakes, 2, 'and so does a request that records an event to deliver');
        await received((d) => d.path === '/woken' && d.body.event === 'customer.suspended');
      } finally {
        stop();
      }
    });

    test('a retry schedule of 1, 2, 8 and 60 seconds: 5 attempts with one delivery id, timestamp and signature, then dropped', async () => {
      await secretOf(lab.live, receiver.url('/flaky'));
      receiver.answer = (d) => (d.path === '/flaky' ? 503 : 200);
      await activeCustomer(server, lab.live, 'retrying'); // records customer.ready
      const [first] = await received((d) => d.path === '/flaky');
      assert.ok(first);
      const id = first.body.id;
      const attemptsOf = () => receiver.deliveries.filter((d) => d.body.id === id);
      // An attempt counts once its outcome is recorded (the retry is scheduled from then).
      const recorded = (n: number) =>
        eventually(
          async () => (await deliveries(lab.live)).data.filter((r) => r.id === id).length,
          (count) => count === n,
        );
      await recorded(1);
      for (const delayMs of [1_000, 2_000, 8_000, 60_000]) {
        const before = attemptsOf().length;
        server.clock.advance(delayMs - 50);
        await server.services.dispatcher.drain();
        assert.equal(attemptsOf().length, before, `no attempt before ${delayMs} ms`);
        server.clock.advance(50);
        await eventually(
          async () => attemptsOf().length,
          (n) => n === before + 1,
        );
        await recorded(before + 1);
      }
      // Nothing after the fifth.
      server.clock.advance(3_600_000);
      await server.services.dispatcher.drain();
      await refreshTokens(server, lab);
      const attempts = attemptsOf();
      assert.equal(attempts.length, 5, '5 attempts in total');
      for (const attempt of attempts) {
        assert.equal(attempt.headers['x-service-delivery'], id);
        assert.equal(attempt.headers['x-service-timestamp'], first.headers['x-service-timestamp']);
        assert.equal(attempt.headers['x-service-signature'], first.headers['x-service-signature']);
        assert.deepEqual(attempt.raw, first.raw);
      }
      const log = (await deliveries(lab.live)).data.filter((r) => r.id === id);
      assert.deepEqual(
        log.map((r) => [r.attempts, r.delivered, r.status]),
        [
          [5, false, 503],
          [4, false, 503],
          [3, false, 503],
          [2, false, 503],
          [1, false, 503],
        ],
        'newest first, one record per attempt',
      );
      const row = await server.database.db.selectFrom('webhook_deliveries').select('state').where('id', '=', id).executeTakeFirst();
      assert.equal(row?.state, 'failed', 'exhausted: dropped, not queued');
    });

    test('429 is retried; 3xx is a failure that is retried and never followed; another 4xx stops at once', async () => {
      await secretOf(lab.live, receiver.url('/codes'));
      const script = new Map<string, number[]>();
      receiver.answer = (d) => {
        if (d.path !== '/codes') return 404;
        const list = script.get(d.body.event) ?? [];
        return list.shift() ?? 200;
      };
      script.set('customer.suspended', [429]);
      script.set('customer.resumed', [302]);
      script.set('customer.deletion_scheduled', [410]);
      await activeCustomer(server, lab.live, 'codes');
      await api(lab.live, 'POST', '/customers/codes/suspend', {});
      await api(lab.live, 'POST', '/customers/codes/resume', {});
      await api(lab.live, 'DELETE', '/customers/codes?grace_days=5');
      for (const event of ['customer.suspended', 'customer.resumed', 'customer.deletion_scheduled']) {
        await received((d) => d.path === '/codes' && d.body.event === event);
      }
      await settled();
      server.clock.advance(1_000);
      await received((d) => d.path === '/codes' && d.body.event === 'customer.suspended', 2);
      await received((d) => d.path === '/codes' && d.body.event === 'customer.resumed', 2);
      await settled();
      server.clock.advance(120_000);
      await server.services.dispatcher.drain();
      assert.equal(receiver.of('customer.deletion_scheduled').filter((d) => d.path === '/codes').length, 1, '410 is not retried');
      assert.equal(receiver.deliveries.filter((d) => d.path === '/redirected').length, 0, 'redirects are not followed');
      const log = (await deliveries(lab.live, '?limit=200')).data;
      const gone = log.find((r) => r.event === 'customer.deletion_scheduled' && r.status === 410);
      assert.deepEqual([gone?.delivered, gone?.attempts], [false, 1]);
      const redirect = log.find((r) => r.event === 'customer.resumed' && r.status === 302);
      assert.match(redirect?.error ?? '', /redirect/);
    });

    test('a destination that resolved public at PUT but private at delivery is refused, and nothing is sent', async () => {
      dns.set('rebind.example', ['93.184.216.34']);
      await api(plain.live, 'DELETE', '/webhook');
      await configure(plain.live, { url: 'https://rebind.example/hooks' });
      dns.set('rebind.example', ['127.0.0.1']);
      const before = receiver.deliveries.length;
      const result = await api<{ data: { delivered: boolean; error: string; status: number | null } }>(plain.live, 'POST', '/webhook/test');
      assert.equal(result.body.data.delivered, false);
      assert.equal(result.body.data.status, null);
      assert.match(result.body.data.error, /^host rebind\.example does not resolve to a public address/);
      assert.doesNotMatch(result.body.data.error, /127\.0\.0\.1/, 'the resolved address is never told to the partner');
      assert.ok(
        server.logs.some(
          (line) => line.msg === 'webhook destination refused' && /127\.0\.0\.1 is a loopback address/.test(String(line.detail)),
        ),
        'the resolved address is in the server log',
      );
      await activeCustomer(server, plain.live, 'rebound');
      const log = await eventually(
        async () => (await deliveries(plain.live)).data.filter((r) => r.event === 'customer.ready'),
        (records) => records.length === 1,
      );
      assert.match(log[0]?.error ?? '', /^host rebind\.example does not resolve to a public address/);
      server.clock.advance(120_000);
      await server.services.dispatcher.drain();
      assert.equal((await deliveries(plain.live)).data.filter((r) => r.event === 'customer.ready').length, 1, 'a refusal is not retried');
      assert.equal(receiver.deliveries.length, before, 'nothing reached the loopback receiver');
      await api(plain.live, 'DELETE', '/webhook');
    });

    test('the connection goes to the checked address while TLS verifies the host name', async () => {
      // receiver.test resolves (in the test resolver only) to the loopback receiver, whose certificate names receiver.test.
      await secretOf(lab.live, `https://receiver.test:${receiver.port}/named`);
      const ping = await api<{ data: { delivered: boolean; status: number } }>(lab.live, 'POST', '/webhook/test');
      assert.deepEqual(ping.body.data.delivered, true, JSON.stringify(ping.body));
      dns.set('wrong-name.test', ['127.0.0.1']);
      await configure(lab.live, { url: `https://wrong-name.test:${receiver.port}/named` });
      const mismatch = await api<{ data: { delivered: boolean; error: string } }>(lab.live, 'POST', '/webhook/test');
      assert.equal(mismatch.body.data.delivered, false);
      assert.match(mismatch.body.data.error, /ERR_TLS_CERT_ALTNAME_INVALID/);
    });
  });
}
