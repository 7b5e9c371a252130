import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { assertError, fieldErrors, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import {
  activeCustomer,
  createCustomer,
  eventually,
  partnerWithModes,
  refreshTokens,
  type Tokens,
  waitForOperation,
} from '../../test/provisioning.ts';
import { TEST_CA_FILE, tableResolver, verifyDelivery, WebhookReceiver } from '../../test/webhook-receiver.ts';
import { fallbackOf } from '../config/settings.ts';
import { EVENT_TYPES, onEventsRecorded, recordEvent } from '../events/store.ts';
import { appendAttempts } from './store.ts';

/** Host names the test resolver answers; anything else does not resolve. */
const { dns, resolver } = tableResolver();

interface Config {
  url: string;
  events: string[];
  enabled: boolean;
  signing_secret?: string;
  signing_secret_configured: boolean;
  previous_secret_valid_until: string | null;
}
interface DeliveryRecord {
  id: string;
  event: string;
  delivered: boolean;
  attempts: number;
  status: number | null;
  error: string | null;
  at: string;
}
interface EventBody {
  id: string;
  event: string;
  created_at: string;
  partner_id: string;
  data: Record<string, unknown>;
}

for (const target of testDatabases()) {
  describe(`webhooks [${target.name}]`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    /** Allowed private destinations, so it can use the loopback receiver. */
    let lab: Tokens;
    /** A partner with the default rules: public receivers only. */
    let plain: Tokens;

    const api = <T = Record<string, unknown>>(
      token: string,
      method: string,
      path: string,
      body?: unknown,
      headers?: Record<string, string>,
    ) => partnerApi<T>(server, method, path, { token, ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) });
    const configure = async (token: string, body: Record<string, unknown>) => {
      const result = await api<{ data: Config }>(token, 'PUT', '/webhook', body);
      assert.equal(result.status, 200, result.text);
      return result.body.data;
    };
    const deliveries = async (token: string, query = '') => {
      const result = await api<{ data: DeliveryRecord[]; pagination: { next_cursor: string | null } }>(
        token,
        'GET',
        `/webhook/deliveries${query}`,
      );
      assert.equal(result.status, 200, result.text);
      return result.body;
    };
    /** Waits until the receiver holds `count` deliveries matching `where`. */
    const received = (where: (d: WebhookReceiver['deliveries'][number]) => boolean, count = 1) =>
      eventually(
        async () => receiver.deliveries.filter(where),
        (list) => list.length >= count,
      );
    /** Every attempt under way has its outcome recorded (so a retry is scheduled before the clock moves). */
    const settled = () =>
      eventually(
        () => server.database.db.selectFrom('events').select('id').where('delivery_lease_until', 'is not', null).execute(),
        (leased) => leased.length === 0,
      );
    const secretOf = async (token: string, url: string, events?: string[]) => {
      await api(token, 'DELETE', '/webhook');
      const config = await configure(token, { url, ...(events ? { events } : {}) });
      assert.ok(config.signing_secret);
      return config.signing_secret;
    };

    before(async () => {
      dns.set('receiver.test', ['127.0.0.1']);
      receiver = await new WebhookReceiver().listen();
      server = await startTestServer(target, { env: { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE }, webhookResolver: resolver });
      lab = await partnerWithModes(server, 'lab', { allow_private_webhooks: true });
      plain = await partnerWithModes(server, 'plain');
    });
    after(async () => {
      await server.stop();
      await receiver.close();
    });
    beforeEach(async () => {
      receiver.answer = () => 200;
      // Tests move the clock by minutes and days: fresh tokens for each.
      await refreshTokens(server, lab);
      await refreshTokens(server, plain);
    });

    describe('configuration', () => {
      test('the PUT that creates the receiver returns the 64-hex secret once; later PUTs and GET never do', async () => {
        await api(lab.live, 'DELETE', '/webhook');
        const created = await api<{ data: Config }>(lab.live, 'PUT', '/webhook', { url: receiver.url() });
        assert.equal(created.status, 200, created.text);
        assert.equal(created.headers.get('cache-control'), 'no-store');
        assert.match(created.body.data.signing_secret ?? '', /^[0-9a-f]{64}$/);
        assert.equal(created.body.data.signing_secret_configured, true);
        assert.deepEqual(created.body.data.events, ['*'], 'default filter');
        assert.equal(created.body.data.enabled, true, 'enabled by default');

        const again = await configure(lab.live, { url: receiver.url('/other'), events: ['customer.*'], enabled: false });
        assert.equal(again.signing_secret, undefined);
        assert.equal(again.signing_secret_configured, true);
        assert.deepEqual([again.url, again.events, again.enabled], [receiver.url('/other'), ['customer.*'], false]);

        const read = await api<{ data: Config }>(lab.live, 'GET', '/webhook');
        assert.equal(read.status, 200);
        assert.equal(read.body.data.signing_secret, undefined);
        assert.doesNotMatch(read.text, new RegExp(created.body.data.signing_secret ?? 'x'));
        assert.equal(read.body.data.url, receiver.url('/other'));
      });

      test('an idempotent replay of the creating PUT carries the secret for 24 hours, then the key is new again', async () => {
        await api(lab.live, 'DELETE', '/webhook');
        const key = { 'idempotency-key': `create-${target.name}` };
        const body = { url: receiver.url() };
        const first = await api<{ data: Config }>(lab.live, 'PUT', '/webhook', body, key);
        const replay = await api<{ data: Config }>(lab.live, 'PUT', '/webhook', body, key);
        assert.equal(replay.headers.get('idempotent-replayed'), 'true');
        assert.equal(replay.body.data.signing_secret, first.body.data.signing_secret);
        assert.match(replay.body.data.signing_secret ?? '', /^[0-9a-f]{64}$/);
        server.clock.advance(24 * 3600 * 1000 + 1000);
        await refreshTokens(server, lab);
        const later = await api<{ data: Config }>(lab.live, 'PUT', '/webhook', body, key);
        assert.equal(later.status, 200);
        assert.equal(later.headers.get('idempotent-replayed'), null);
        assert.equal(later.body.data.signing_secret, undefined, 'the secret exists: a fresh PUT does not return it');
      });

      test('URL and filter problems answer 400 VALIDATION_ERROR naming each field; unknown events list the known ones', async () => {
        const cases: [Record<string, unknown>, string, RegExp][] = [
          [{ url: 'http://receiver.test/hooks' }, 'url', /https/],
          [{ url: 'https://user:pw@receiver.test/hooks' }, 'url', /credentials/],
          [{ url: 'https://receiver.test/hooks#frag' }, 'url', /fragment/],
          [{ url: 'not a url' }, 'url', /absolute URL/],
          [{ url: 'ftp://receiver.test/' }, 'url', /https/],
          [{ url: 'https://nowhere.test/hooks' }, 'url', /does not resolve to a public address/],
        ];
        for (const [body, field, message] of cases) {
          const error = assertError(await api(plain.live, 'PUT', '/webhook', body), 400, 'VALIDATION_ERROR');
          const [problem] = fieldErrors(error);
          assert.equal(problem?.field, field, JSON.stringify(body));
          assert.match(problem?.message ?? '', message, JSON.stringify(error));
        }
        const unknown = assertError(
          await api(lab.live, 'PUT', '/webhook', {
            url: receiver.url(),
            events: ['customer.ready', 'customer.exploded', 'ping', 'quota.*'],
          }),
          400,
          'VALIDATION_ERROR',
        );
        assert.deepEqual(
          fieldErrors(unknown).map((p) => p.field),
          ['events.1', 'events.2', 'events.3'],
        );
        assert.match(fieldErrors(unknown)[1]?.message ?? '', /ping cannot be named/);
        const known = unknown.details?.known_events as string[];
        assert.ok(known.includes('*') && known.includes('customer.*') && known.includes('project.*'));
        for (const name of EVENT_TYPES) assert.ok(known.includes(name), name);
        assert.ok(!known.includes('ping'));
        assertError(await api(lab.live, 'PUT', '/webhook', { url: receiver.url(), extra: 1 }), 400, 'VALIDATION_ERROR');
        assertError(await api(lab.live, 'PUT', '/webhook', { events: ['*'] }), 400, 'VALIDATION_ERROR');
        // An empty list is valid and means every event.
        assert.deepEqual((await configure(lab.live, { url: receiver.url(), events: [] })).events, []);
      });

      test('at least 50 private, local and special-purpose destinations are refused, whatever their spelling', async () => {
        dns.set('internal.example', ['10.1.2.3']);
        dns.set('mixed.example', ['93.184.216.34', '192.168.1.1']);
        dns.set('metadata.example', ['169.254.169.254']);
        dns.set('v6local.example', ['fd00::1']);
        dns.set('mapped.example', ['::ffff:127.0.0.1']);
        const refused = [
          'https://127.0.0.1/',
          'https://127.1/',
          'https://127.255.255.254/',
          'https://2130706433/',
          'https://0x7f000001/',
          'https://0177.0.0.1/',
          'https://0x7f.0.0.1/',
          'https://017700000001/',
          'https://10.0.0.1/',
          'https://10.255.255.255/',
          'https://167772161/',
          'https://172.16.0.1/',
          'https://172.31.255.1/',
          'https://192.168.0.1/',
          'https://0xc0a80001/',
          'https://169.254.169.254/latest/meta-data/',
          'https://169.254.0.1/',
          'https://2852039166/',
          'https://100.64.0.1/',
          'https://100.127.255.254/',
          'https://0.0.0.0/',
          'https://0/',
          'https://0.1.2.3/',
          'https://224.0.0.1/',
          'https://239.255.255.250/',
          'https://255.255.255.255/',
          'https://240.0.0.1/',
          'https://192.0.2.1/',
          'https://198.51.100.7/',
          'https://203.0.113.9/',
          'https://198.18.0.1/',
          'https://192.0.0.8/',
          'https://[::1]/',
          'https://[::]/',
          'https://[0:0:0:0:0:0:0:1]/',
          'https://[::ffff:127.0.0.1]/',
          'https://[::ffff:7f00:1]/',
          'https://[::ffff:10.0.0.1]/',
          'https://[::ffff:169.254.169.254]/',
          'https://[::127.0.0.1]/',
          'https://[fe80::1]/',
          'https://[febf::1]/',
          'https://[fc00::1]/',
          'https://[fd12:3456::1]/',
          'https://[ff02::1]/',
          'https://[64:ff9b::a00:1]/',
          'https://[2002:7f00:1::]/',
          'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
          'https://[2001:db8::1]/',
          'https://[fec0::1]/',
          'https://localhost/',
          'https://LOCALHOST./',
          'https://api.localhost/',
          'https://internal.example/',
          'https://mixed.example/',
          'https://metadata.example/',
          'https://v6local.example/',
          'https://mapped.example/',
        ];
        assert.ok(refused.length >= 50);
        for (const url of refused) {
          const error = assertError(await api(plain.live, 'PUT', '/webhook', { url }), 400, 'VALIDATION_ERROR');
          const [problem] = fieldErrors(error);
          assert.equal(problem?.field, 'url', url);
          assert.match(
            problem?.message ?? '',
            /does not resolve to a public address|port \d+ is not allowed/,
            `${url}: ${problem?.message}`,
          );
          // Each refusal says what to do about it, and never what a name resolved to.
          assert.match(
            problem?.message ?? '',
            /tenantry partners update <partner-id> --allow-private-webhooks.*TENANTRY_WEBHOOK_CA_FILE/,
            url,
          );
          const host = new URL(url).hostname;
          if (!/^[\d.]+$|^\[/.test(host))
            assert.doesNotMatch(problem?.message ?? '', /\d+\.\d+\.\d+\.\d+|[0-9a-f]*::|resolves to/i, `${url}: ${problem?.message}`);
        }
        assertError(await api(plain.live, 'GET', '/webhook'), 404, 'NOT_FOUND');
        // A public destination is accepted.
        dns.set('hooks.partner.example', ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946']);
        assert.equal((await api(plain.live, 'PUT', '/webhook', { url: 'https://hooks.partner.example/tenantry' })).status, 200);
        assert.equal((await api(plain.live, 'PUT', '/webhook', { url: 'https://8.8.8.8:443/hooks?x=1' })).status, 200);
        // Another port needs the operator's allowance, like a private address (or deliveries would scan ports).
        for (const url of ['https://8.8.8.8:8443/hooks', 'https://hooks.partner.example:22/', 'https://127.0.0.1:8443/hooks']) {
          const [problem] = fieldErrors(assertError(await api(plain.live, 'PUT', '/webhook', { url }), 400, 'VALIDATION_ERROR'));
          assert.match(problem?.message ?? '', /port \d+ is not allowed/, url);
        }
        await api(plain.live, 'DELETE', '/webhook');
      });

      test('cloud metadata and host-service addresses are refused even for a partner allowed private receivers', async () => {
        dns.set('metadata.example', ['169.254.169.254']);
        dns.set('wireserver.example', ['168.63.129.16']);
        dns.set('imds6.example', ['2600:1f18::1', 'fd00:ec2::254']);
        const refused = [
          'https://metadata.example/',
          'https://169.254.169.254/latest/meta-data/',
          'https://169.254.170.2/v2/credentials',
          'https://[::ffff:169.254.169.254]/',
          'https://[fe80::a9fe:a9fe]/',
          'https://168.63.129.16/',
          'https://wireserver.example/',
          'https://100.100.100.200/',
          'https://[fd00:ec2::254]/',
          'https://imds6.example/',
        ];
        for (const url of refused) {
          const [problem] = fieldErrors(assertError(await api(lab.live, 'PUT', '/webhook', { url }), 400, 'VALIDATION_ERROR'));
          assert.equal(problem?.field, 'url', url);
        }
        // The allowance still covers ordinary private addresses and other ports.
        assert.equal((await api(lab.live, 'PUT', '/webhook', { url: receiver.url() })).status, 200);
        await api(lab.live, 'DELETE', '/webhook');
      });

      test('DELETE removes the configuration and its secret; test and rotation then answer NOT_CONFIGURED', async () => {
        await configure(lab.live, { url: receiver.url() });
        const removed = await api<{ data: { deleted: boolean } }>(lab.live, 'DELETE', '/webhook');
        assert.equal(removed.status, 200);
        assert.deepEqual(removed.body.data, { deleted: true });
        assertError(await api(lab.live, 'GET', '/webhook'), 404, 'NOT_FOUND');
        assertError(await api(lab.live, 'DELETE', '/webhook'), 404, 'NOT_FOUND');
        assertError(await api(lab.live, 'POST', '/webhook/test'), 400, 'NOT_CONFIGURED');
        assertError(await api(lab.live, 'POST', '/webhook/secret'), 400, 'NOT_CONFIGURED');
      });

      test('live and test mode have separate receivers', async () => {
        await api(lab.live, 'DELETE', '/webhook');
        await api(lab.test, 'DELETE', '/webhook');
        await configure(lab.test, { url: receiver.url('/test-mode') });
        assertError(await api(lab.live, 'GET', '/webhook'), 404, 'NOT_FOUND');
        assert.equal((await api<{ data: Config }>(lab.test, 'GET', '/webhook')).body.data.url, receiver.url('/test-mode'));
        await api(lab.test, 'DELETE', '/webhook');
      });
    });

    describe('delivery', () => {
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
        // The events are recorded and listable, but their deliveries are skipped.
        await eventually(
          async () => server.database.db.selectFrom('events').select('delivery_state').where('partner_id', '=', 'lab').execute(),
          (rows) => rows.every((r) => r.delivery_state !== 'pending'),
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
        const stop = onEventsRecorded(() => {
          wakes += 1;
        });
        try {
          const quiet = await partnerWithModes(server, 'quiet');
          await activeCustomer(server, quiet.live, 'hush'); // customer.ready, recorded by the operation's finish
          assert.equal((await api(quiet.live, 'POST', '/customers/hush/suspend', {})).status, 200); // recorded by the request
          const recorded = await api<{ data: EventBody[] }>(quiet.live, 'GET', '/events');
          assert.deepEqual(recorded.body.data.map((e) => e.event).sort(), ['customer.ready', 'customer.suspended']);
          assert.equal(wakes, 0, 'events no receiver wants are recorded skipped and wake nothing');

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
        const row = await server.database.db.selectFrom('events').select(['delivery_state']).where('id', '=', id).executeTakeFirst();
        assert.equal(row?.delivery_state, 'failed', 'exhausted: dropped, not queued');
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
        const result = await api<{ data: { delivered: boolean; error: string; status: number | null } }>(
          plain.live,
          'POST',
          '/webhook/test',
        );
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

      test('a receiver that never answers holds only its own delivery slots: other partners and the API stay fast', async () => {
        const slow = await partnerWithModes(server, 'slowpoke', { allow_private_webhooks: true });
        await configure(slow.live, { url: receiver.url('/slow') });
        receiver.answer = (d) => (d.path === '/slow' ? 'hang' : 200);
        // The default of TENANTRY_WEBHOOK_CONCURRENCY; each customer records at least one event.
        const cap = Number(fallbackOf('TENANTRY_WEBHOOK_CONCURRENCY'));
        for (let i = 0; i < cap + 4; i++) await createCustomer(server, slow.live, `slow-${i}`);
        await received((d) => d.path === '/slow', cap);
        await secretOf(lab.live, receiver.url('/fast'));
        const started = Date.now();
        await activeCustomer(server, lab.live, 'fast-co');
        const [fast] = await received((d) => d.path === '/fast' && d.body.data.customer_id === 'fast-co');
        assert.ok(
          (fast?.receivedAtMs ?? Infinity) - started < 1_000,
          `delivered ${(fast?.receivedAtMs ?? 0) - started} ms after the request`,
        );
        const read = Date.now();
        assert.equal((await api(slow.live, 'GET', '/customers?limit=200')).status, 200);
        assert.ok(Date.now() - read < 500, 'the API does not wait for deliveries');
        assert.equal(receiver.deliveries.filter((d) => d.path === '/slow').length, cap, `no more than ${cap} in flight to one receiver`);
        await api(slow.live, 'DELETE', '/webhook');
      });

      test('TENANTRY_WEBHOOK_CONCURRENCY sets that bound', async () => {
        const own = await startTestServer(target, {
          env: { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE, TENANTRY_WEBHOOK_CONCURRENCY: '3' },
          webhookResolver: resolver,
        });
        const hanging = await new WebhookReceiver().listen();
        hanging.answer = () => 'hang';
        try {
          const narrow = await partnerWithModes(own, 'narrow', { allow_private_webhooks: true });
          const put = await partnerApi(own, 'PUT', '/webhook', { token: narrow.live, body: { url: hanging.url() } });
          assert.equal(put.status, 200, put.text);
          // Provisioned to the end, so each has recorded its events before the count below.
          for (let i = 0; i < 6; i++) await activeCustomer(own, narrow.live, `narrow-${i}`);
          const events = (leased: boolean) =>
            own.database.db
              .selectFrom('events')
              .select('id')
              .where('partner_id', '=', 'narrow')
              .where('delivery_state', '=', 'pending')
              .where('delivery_lease_until', leased ? 'is not' : 'is', null)
              .execute();
          await eventually(
            () => events(true),
            (rows) => rows.length >= 3,
          );
          // A pass that ran, with deliveries waiting: it claims none of them.
          assert.equal(await own.services.dispatcher.runDue(), 0);
          assert.equal((await events(true)).length, 3, 'three in flight');
          assert.ok((await events(false)).length > 0, 'the rest wait');
        } finally {
          await hanging.close();
          await own.stop();
        }
      });

      test('passes that overlap never take one delivery twice', async () => {
        const own = await startTestServer(target, { env: { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE }, webhookResolver: resolver });
        const sink = await new WebhookReceiver().listen();
        try {
          const token = (await partnerWithModes(own, 'overlap', { allow_private_webhooks: true })).live;
          const put = await partnerApi(own, 'PUT', '/webhook', { token, body: { url: sink.url() } });
          assert.equal(put.status, 200, put.text);
          const { dispatcher } = own.services;
          // Only the passes below run: the background loop is stopped.
          await dispatcher.stop();
          const count = 20;
          await own.database.db.transaction().execute(async (trx) => {
            for (let i = 0; i < count; i++) {
              await recordEvent(trx, {
                partnerId: 'overlap',
                mode: 'live',
                type: 'customer.suspended',
                at: new Date(),
                data: { customer_id: `c${i}`, state: 'suspended', suspended_at: new Date().toISOString(), workloads_running: 0 },
              });
            }
          });
          // Three passes at once: each reads the same pending deliveries before any is sent.
          const claimed = await Promise.all([dispatcher.runDue(), dispatcher.runDue(), dispatcher.runDue()]);
          await dispatcher.drain();
          assert.equal(
            claimed.reduce((sum, n) => sum + n, 0),
            count,
            `claimed ${claimed.join(' + ')}`,
          );
          const ids = sink.deliveries.map((d) => d.body.id);
          assert.equal(ids.length, count, 'each delivery sent');
          assert.equal(new Set(ids).size, count, 'none sent twice');
        } finally {
          await sink.close();
          await own.stop();
        }
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

    describe('test ping, rotation and the log', () => {
      test('POST /webhook/test sends one signed ping, ignoring the filter and a disabled receiver', async () => {
        const secret = await secretOf(lab.live, receiver.url('/ping'), ['project.ready']);
        await configure(lab.live, { url: receiver.url('/ping'), events: ['project.ready'], enabled: false });
        const result = await api<{ data: { delivered: boolean; delivery_id: string; attempts: number; status: number; error: null } }>(
          lab.live,
          'POST',
          '/webhook/test',
        );
        assert.equal(result.status, 200, result.text);
        assert.deepEqual(
          { ...result.body.data, delivery_id: 'x' },
          { delivered: true, delivery_id: 'x', attempts: 1, status: 200, error: null },
        );
        const [ping] = receiver.deliveries.filter((d) => d.body.id === result.body.data.delivery_id);
        assert.ok(ping);
        assert.equal(ping.body.event, 'ping');
        assert.equal(typeof ping.body.data.message, 'string');
        assert.equal(verifyDelivery(ping, [secret], server.clock.nowMs()), secret);

        receiver.answer = () => 500;
        const failed = await api<{ data: { delivered: boolean; attempts: number; status: number } }>(lab.live, 'POST', '/webhook/test');
        assert.deepEqual([failed.body.data.delivered, failed.body.data.attempts, failed.body.data.status], [false, 1, 500]);
        server.clock.advance(120_000);
        await server.services.dispatcher.drain();
        assert.equal(receiver.deliveries.filter((d) => d.body.event === 'ping' && d.path === '/ping').length, 2, 'a ping is never retried');
        assertError(await api(plain.live, 'POST', '/webhook/test'), 400, 'NOT_CONFIGURED');
      });

      test('a ping to a receiver that never answers times out after 5 seconds', async () => {
        await secretOf(lab.live, receiver.url('/hang'));
        receiver.answer = () => 'hang';
        const started = Date.now();
        const result = await api<{ data: { delivered: boolean; error: string; status: null } }>(lab.live, 'POST', '/webhook/test');
        const elapsed = Date.now() - started;
        assert.equal(result.body.data.delivered, false);
        assert.match(result.body.data.error, /timed out after 5 seconds/);
        assert.ok(elapsed >= 4_900 && elapsed < 7_000, `${elapsed} ms`);
      });

      test('rotation: new deliveries use the new secret at once; retries of earlier ones keep their signature', async () => {
        const old = await secretOf(lab.live, receiver.url('/rotate'));
        receiver.answer = (d) => (d.path === '/rotate' && d.body.event === 'customer.suspended' ? 503 : 200);
        await activeCustomer(server, lab.live, 'rotating');
        await api(lab.live, 'POST', '/customers/rotating/suspend', {});
        const [before] = await received((d) => d.path === '/rotate' && d.body.event === 'customer.suspended');
        assert.ok(before);
        const rotated = await api<{ data: { signing_secret: string; previous_secret_valid_until: string } }>(
          lab.live,
          'POST',
          '/webhook/secret',
        );
        assert.equal(rotated.status, 200);
        const fresh = rotated.body.data.signing_secret;
        assert.match(fresh, /^[0-9a-f]{64}$/);
        assert.notEqual(fresh, old);
        assert.ok(Date.parse(rotated.body.data.previous_secret_valid_until) > server.clock.nowMs());
        receiver.answer = () => 200;
        await settled();
        server.clock.advance(1_000);
        const retries = await received((d) => d.body.id === before.body.id, 2);
        assert.equal(verifyDelivery(retries[1] as never, [old], server.clock.nowMs()), old, 'the retry keeps the original signature');
        assert.equal(verifyDelivery(retries[1] as never, [fresh], server.clock.nowMs()), undefined);
        await api(lab.live, 'POST', '/customers/rotating/resume', {});
        const [after] = await received((d) => d.path === '/rotate' && d.body.event === 'customer.resumed');
        assert.ok(after);
        assert.equal(verifyDelivery(after, [old, fresh], server.clock.nowMs()), fresh, 'new deliveries are signed with the new secret');
        const ping = await api<{ data: { delivery_id: string } }>(lab.live, 'POST', '/webhook/test');
        const [pinged] = receiver.deliveries.filter((d) => d.body.id === ping.body.data.delivery_id);
        assert.equal(verifyDelivery(pinged as never, [old], server.clock.nowMs()), undefined);
      });

      test('the delivery log keeps the 50 most recent attempts, newest first, paginated', async () => {
        await secretOf(lab.test, receiver.url('/log'));
        const ids: string[] = [];
        for (let i = 0; i < 60; i++)
          ids.push((await api<{ data: { delivery_id: string } }>(lab.test, 'POST', '/webhook/test')).body.data.delivery_id);
        const seen: DeliveryRecord[] = [];
        let cursor: string | null = null;
        do {
          const page: { data: DeliveryRecord[]; pagination: { next_cursor: string | null } } = await deliveries(
            lab.test,
            `?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          );
          seen.push(...page.data);
          cursor = page.pagination.next_cursor;
        } while (cursor);
        assert.equal(seen.length, 50);
        assert.deepEqual(
          seen.map((r) => r.id),
          ids.slice(-50).reverse(),
        );
        for (const record of seen) {
          assert.deepEqual(Object.keys(record).sort(), ['at', 'attempts', 'delivered', 'error', 'event', 'id', 'status']);
          assert.deepEqual([record.event, record.delivered, record.status], ['ping', true, 200]);
        }
        assertError(
          await api(lab.live, 'GET', `/webhook/deliveries?cursor=${encodeURIComponent(String(seen.length))}`),
          400,
          'VALIDATION_ERROR',
        );
        await api(lab.test, 'DELETE', '/webhook');
      });

      test('outcomes written in one batch keep each log to its 50 most recent attempts, in order, whatever the batch holds', async () => {
        // The dispatcher writes a burst's outcomes in one statement, which cannot see its own inserts
        // while it trims: a batch over 50, or one that fills a log with old attempts.
        const attempt = (mode: 'live' | 'test', n: number) => ({
          partner_id: lab.id,
          mode,
          delivery_id: `evt_batch_${mode}_${n}`,
          event: 'customer.ready',
          delivered: n % 2 === 0,
          attempt: 1 + (n % 3),
          status: n % 2 === 0 ? 200 : null,
          error: n % 2 === 0 ? null : 'connection refused',
          at: new Date(server.clock.nowMs() + n),
        });
        const batch = (mode: 'live' | 'test', from: number, to: number) =>
          Array.from({ length: to - from }, (_, i) => attempt(mode, from + i));
        const logOf = async (token: string) => {
          const seen: DeliveryRecord[] = [];
          let cursor: string | null = null;
          do {
            const page: { data: DeliveryRecord[]; pagination: { next_cursor: string | null } } = await deliveries(
              token,
              `?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
            );
            seen.push(...page.data);
            cursor = page.pagination.next_cursor;
          } while (cursor);
          return seen;
        };
        const ids = (mode: 'live' | 'test', from: number, to: number) =>
          batch(mode, from, to)
            .map((a) => a.delivery_id)
            .reverse();
        const { db } = server.database;

        await appendAttempts(db, batch('live', 0, 30));
        // One batch for two logs: 60 to the live log (over 50 by itself) and 5 to the test log.
        await appendAttempts(db, [...batch('live', 30, 90), ...batch('test', 0, 5)]);
        const live = await logOf(lab.live);
        assert.deepEqual(
          live.map((r) => r.id),
          ids('live', 40, 90),
        );
        assert.deepEqual(live[0], {
          id: 'evt_batch_live_89',
          event: 'customer.ready',
          delivered: false,
          attempts: 3,
          status: null,
          error: 'connection refused',
          at: new Date(server.clock.nowMs() + 89).toISOString(),
        });
        // Old attempts are kept as far as they fit beside the new ones.
        await appendAttempts(db, batch('live', 90, 110));
        assert.deepEqual(
          (await logOf(lab.live)).map((r) => r.id),
          ids('live', 60, 110),
        );
        assert.deepEqual((await logOf(lab.test)).map((r) => r.id).slice(0, 5), ids('test', 0, 5));
      });

      test('deleting the receiver drops deliveries still waiting for a retry', async () => {
        await secretOf(lab.live, receiver.url('/dropped'));
        receiver.answer = (d) => (d.path === '/dropped' ? 503 : 200);
        await activeCustomer(server, lab.live, 'dropping');
        const [first] = await received((d) => d.path === '/dropped');
        await settled();
        await api(lab.live, 'DELETE', '/webhook');
        server.clock.advance(120_000);
        await server.services.dispatcher.drain();
        assert.equal(receiver.deliveries.filter((d) => d.body.id === first?.body.id).length, 1);
        const row = await server.database.db
          .selectFrom('events')
          .select('delivery_state')
          .where('id', '=', first?.body.id ?? '')
          .executeTakeFirst();
        assert.equal(row?.delivery_state, 'skipped', 'no longer pending: nothing is left to deliver');
      });

      test('a retry is sent only if the receiver still wants it: disabled, or filtered out since, it is skipped', async () => {
        await secretOf(lab.live, receiver.url('/changed'));
        receiver.answer = (d) => (d.path === '/changed' ? 503 : 200);
        await activeCustomer(server, lab.live, 'changing-mind');
        const [first] = await received((d) => d.path === '/changed');
        assert.ok(first);
        await settled();
        const stateOf = async (id: string) =>
          (await server.database.db.selectFrom('events').select('delivery_state').where('id', '=', id).executeTakeFirstOrThrow())
            .delivery_state;
        assert.equal(await stateOf(first.body.id), 'pending', 'a retry waits');

        // The filter no longer takes customer events: the waiting retry is dropped when it falls due.
        await configure(lab.live, { url: receiver.url('/changed'), events: ['project.*'] });
        server.clock.advance(1_000);
        await server.services.dispatcher.drain();
        assert.equal(receiver.deliveries.filter((d) => d.body.id === first.body.id).length, 1, 'not sent again');
        assert.equal(await stateOf(first.body.id), 'skipped');

        // The same for a receiver disabled while a retry waits.
        await configure(lab.live, { url: receiver.url('/changed'), events: [] });
        await activeCustomer(server, lab.live, 'changing-mind-2');
        const [second] = await received((d) => d.path === '/changed' && d.body.data.customer_id === 'changing-mind-2');
        assert.ok(second);
        await settled();
        await configure(lab.live, { url: receiver.url('/changed'), enabled: false });
        server.clock.advance(1_000);
        await server.services.dispatcher.drain();
        assert.equal(receiver.deliveries.filter((d) => d.body.id === second.body.id).length, 1, 'not sent again');
        assert.equal(await stateOf(second.body.id), 'skipped');
      });
    });

    describe('GET /events', () => {
      test('newest first, filtered by type, paginated, 30 days, and its mode only', async () => {
        const all = (await api<{ data: EventBody[] }>(lab.live, 'GET', '/events?limit=200')).body.data;
        assert.ok(all.length > 10);
        assert.deepEqual(
          all.map((e) => e.id),
          [...all.map((e) => e.id)].sort().reverse(),
        );
        const walked: string[] = [];
        let cursor: string | null = null;
        do {
          const page: { status: number; body: { data: EventBody[]; pagination: { next_cursor: string | null } } } = await api(
            lab.live,
            'GET',
            `/events?limit=3&type=customer.suspended${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          );
          assert.equal(page.status, 200);
          walked.push(...page.body.data.map((e) => e.id));
          assert.ok(page.body.data.every((e) => e.event === 'customer.suspended'));
          cursor = page.body.pagination.next_cursor;
        } while (cursor);
        assert.deepEqual(
          walked,
          all.filter((e) => e.event === 'customer.suspended').map((e) => e.id),
        );
        const unknown = assertError(await api(lab.live, 'GET', '/events?type=ping'), 400, 'VALIDATION_ERROR');
        assert.deepEqual(unknown.details?.known_events, [...EVENT_TYPES]);
        assertError(await api(lab.live, 'GET', '/events?kind=x'), 400, 'VALIDATION_ERROR');
        const other = (await api<{ data: EventBody[] }>(plain.live, 'GET', '/events?limit=200')).body.data;
        assert.ok(other.every((e) => e.partner_id === 'plain'));

        // 30 days on: the test mode's clock moves, and its old events leave the list.
        const testEvents = (await api<{ data: EventBody[] }>(lab.test, 'GET', '/events')).body.data;
        assert.ok(testEvents.length > 0);
        await api(lab.test, 'POST', '/test-helpers/clock/advance', { seconds: 31 * 24 * 3600 });
        assert.deepEqual((await api<{ data: EventBody[] }>(lab.test, 'GET', '/events')).body.data, []);
      });
    });
  });
}
