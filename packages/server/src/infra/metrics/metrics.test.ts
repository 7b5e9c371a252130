import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, http, partnerApi } from '../../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';
import { parseExposition, type Sample, samplesOf, total } from '../../../test/prometheus/exposition.ts';
import { createCustomer, eventually, partnerWithModes, type Tokens } from '../../../test/provisioning.ts';
import { TEST_CA_FILE, tableResolver, WebhookReceiver } from '../../../test/webhook-receiver.ts';

const SCRAPE_TOKEN = 'scrape-token-for-the-tests-0123';
/** Every partner's and customer's id starts so: no label value may contain it. */
const PARTNER = 'pmq';
const CUSTOMER = 'cmz';

for (const target of testDatabases()) {
  describe(`GET /metrics [${target.name}]`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    let good: Tokens;
    let failing: Tokens;
    let limited: Tokens;
    const scrape = async (): Promise<Sample[]> => {
      const result = await http(server.operatorUrl, 'GET', '/metrics', { token: SCRAPE_TOKEN });
      assert.equal(result.status, 200, result.text);
      return parseExposition(result.text);
    };

    before(async () => {
      const { dns, resolver } = tableResolver();
      dns.set('receiver.test', ['127.0.0.1']);
      receiver = await new WebhookReceiver().listen();
      receiver.answer = (delivery) => (delivery.path === '/failing' ? 500 : 200);
      // Provisioning takes a minute of the manual clock: an operation stays open until the test moves it.
      server = await startTestServer(target, {
        env: { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE, TENANTRY_SANDBOX_DELAY_MS: '60000', TENANTRY_METRICS_SCRAPE_TOKEN: SCRAPE_TOKEN },
        webhookResolver: resolver,
      });
      good = await partnerWithModes(server, `${PARTNER}-good`, { allow_private_webhooks: true });
      failing = await partnerWithModes(server, `${PARTNER}-failing`, { allow_private_webhooks: true });
      limited = await partnerWithModes(server, `${PARTNER}-limited`, { limits: { rate_limit_per_minute: 1, rate_limit_burst: 2 } });
    });
    after(async () => {
      await server?.stop();
      await receiver?.close();
    });

    test('answers the scrape token only, never the operator token, in the text format with the process metrics', async () => {
      assertError(await http(server.operatorUrl, 'GET', '/metrics'), 401, 'UNAUTHORIZED');
      assertError(await http(server.operatorUrl, 'GET', '/metrics', { token: server.operatorToken }), 401, 'UNAUTHORIZED');
      assert.equal((await http(server.partnerUrl, 'GET', '/metrics', { token: SCRAPE_TOKEN })).status, 404);
      const result = await http(server.operatorUrl, 'GET', '/metrics', { token: SCRAPE_TOKEN });
      assert.equal(result.status, 200);
      assert.match(result.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
      const samples = parseExposition(result.text);
      assert.ok(samplesOf(samples, 'process_cpu_user_seconds_total').length === 1);
      assert.ok(samplesOf(samples, 'nodejs_eventloop_lag_seconds').length === 1);
      assert.equal(samplesOf(samples, 'tenantry_database_pool_waiting')[0]?.value, 0);
    });

    test('requests, operations, platform calls, deliveries and a 429 move their series, labelled by patterns, never by ids', async () => {
      const unmatchedBefore = total(await scrape(), 'tenantry_http_requests_total', { route: 'unmatched' });
      for (const [tokens, path] of [
        [good, '/hooks'],
        [failing, '/failing'],
      ] as const) {
        const put = await partnerApi(server, 'PUT', '/webhook', { token: tokens.live, body: { url: receiver.url(path, 'receiver.test') } });
        assert.equal(put.status, 200, put.text);
      }
      await createCustomer(server, good.live, `${CUSTOMER}-one`);
      await createCustomer(server, failing.live, `${CUSTOMER}-two`);
      assert.equal((await partnerApi(server, 'GET', `/customers/${CUSTOMER}-one`, { token: good.live })).status, 200);
      assert.equal((await partnerApi(server, 'GET', `/no-such-route/${CUSTOMER}-one`, { token: good.live })).status, 404);

      // Each operation's first look finds provisioning under way; both stay open.
      await eventually(scrape, (s) => total(s, 'tenantry_operation_steps_total', { type: 'customer.create', result: 'in_progress' }) === 2);
      // The database gauges are read again once the clock has passed their cache's 5 s.
      server.clock.advance(30_000);
      let samples = await scrape();
      assert.equal(total(samples, 'tenantry_operations_open', { type: 'customer.create' }), 2);
      assert.equal(total(samples, 'tenantry_operation_oldest_open_seconds'), 30);

      // Provisioning ends; each customer.ready goes to its partner's receiver, one of which answers 500.
      server.clock.advance(31_000);
      await eventually(
        async () => receiver.deliveries.filter((d) => d.body.event === 'customer.ready').map((d) => d.path),
        (paths) => paths.includes('/hooks') && paths.includes('/failing'),
      );
      await eventually(
        () => server.database.db.selectFrom('webhook_deliveries').select('id').where('lease_until', 'is not', null).execute(),
        (leased) => leased.length === 0,
      );
      let refused = 0;
      for (let i = 0; i < 4; i++) if ((await partnerApi(server, 'GET', '/auth/whoami', { token: limited.live })).status === 429) refused++;
      assert.ok(refused >= 1);
      server.clock.advance(5_000);
      samples = await scrape();

      const requests = (labels: Record<string, string>) =>
        total(samples, 'tenantry_http_requests_total', { api: 'partner-api', ...labels });
      assert.equal(requests({ method: 'POST', route: '/api/public/v1/customers', status: '202' }), 2);
      assert.equal(requests({ method: 'GET', route: '/api/public/v1/customers/:id', status: '200' }), 1);
      // A path no route matches is counted under one label, whatever it was.
      assert.equal(requests({ method: 'GET', route: 'unmatched', status: '404' }), unmatchedBefore + 1);
      assert.equal(requests({ route: '/api/public/v1/auth/whoami', status: '429' }), refused);
      assert.equal(total(samples, 'tenantry_rate_limited_total', { api: 'partner-api' }), refused);
      const created202 = { api: 'partner-api', method: 'POST', route: '/api/public/v1/customers' };
      assert.equal(total(samples, 'tenantry_http_request_duration_seconds_count', created202), 2);
      assert.equal(total(samples, 'tenantry_http_request_duration_seconds_bucket', { ...created202, le: '+Inf' }), 2);
      assert.ok(total(samples, 'tenantry_http_requests_total', { api: 'operator-api', route: '/api/operator/v1/partners' }) >= 3);

      assert.equal(total(samples, 'tenantry_operations_open'), 0);
      assert.equal(total(samples, 'tenantry_operation_oldest_open_seconds'), 0);
      assert.equal(total(samples, 'tenantry_operation_steps_total', { type: 'customer.create', result: 'done' }), 2);
      assert.ok(total(samples, 'tenantry_platform_calls_total', { platform: 'sandbox', call: 'provisionCustomer', result: 'ok' }) >= 4);
      assert.ok(total(samples, 'tenantry_platform_call_duration_seconds_count', { platform: 'sandbox', call: 'provisionCustomer' }) >= 4);

      assert.ok(total(samples, 'tenantry_webhook_deliveries_total', { result: 'delivered' }) >= 1);
      assert.ok(total(samples, 'tenantry_webhook_deliveries_total', { result: 'retrying' }) >= 1);
      assert.equal(total(samples, 'tenantry_webhook_receivers_failing'), 1);
      // Live-mode events to their first attempts: the two customer.ready, sent on the same clock tick.
      assert.equal(total(samples, 'tenantry_webhook_lag_seconds_count'), 2);
      assert.equal(total(samples, 'tenantry_webhook_lag_seconds_bucket', { le: '0.01' }), 2);

      const ids = samples.flatMap((s) => Object.values(s.labels)).filter((v) => v.includes(PARTNER) || v.includes(CUSTOMER));
      assert.deepEqual(ids, []);
    });
  });
}
