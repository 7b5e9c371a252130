import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, createCustomer, eventually, partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import { resolver, useWebhookWorld } from '../../test/webhook-fixture.ts';
import { TEST_CA_FILE, WebhookReceiver } from '../../test/webhook-receiver.ts';
import { fallbackOf } from '../config/settings.ts';

for (const target of testDatabases()) {
  describe(`webhooks: delivery slots [${target.name}]`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    let lab: Tokens;
    const { api, configure, received, secretOf } = useWebhookWorld(target, (world) => {
      ({ server, receiver, lab } = world);
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
      // A delivery that timed out may be sent again, but never more than the bound at once.
      assert.equal(receiver.mostOpen.get('/slow'), cap, `no more than ${cap} in flight to one receiver`);
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
            .selectFrom('webhook_deliveries')
            .select('id')
            .where('partner_id', '=', 'narrow')
            .where('state', '=', 'pending')
            .where('lease_until', leased ? 'is not' : 'is', null)
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
            await own.services.events.record(trx, {
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
  });
}
