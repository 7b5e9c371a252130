import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer, testDatabases } from '../../server/test/harness.ts';
import { eventually, partnerWithModes, type Tokens } from '../../server/test/provisioning.ts';
import { TEST_CA_FILE, WebhookReceiver } from '../../server/test/webhook-receiver.ts';
import {
  computeSignature,
  handleOnce,
  memoryDedupeStore,
  signTestWebhook,
  Tenantry,
  verifyWebhook,
  type WebhookEvent,
  WebhookVerificationError,
} from './index.ts';

/** What a receiver does with the union: `switch` on `event` narrows `data` to that event's fields. */
function summary(event: WebhookEvent): string {
  switch (event.event) {
    case 'customer.ready':
      return `${event.data.customer_id} is ${event.data.state} (project ${event.data.project?.name} ${event.data.project?.state})`;
    case 'customer.suspended':
      return `${event.data.customer_id} suspended at ${event.data.suspended_at}`;
    default:
      return event.event;
  }
}

// CONTRACT, "Webhook signature: the key bytes".
const SECRET = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const TIMESTAMP = '1767225600';
const BODY = '{"id":"dlv_01","event":"ping","created_at":"2026-01-01T00:00:00Z","partner_id":"acme","data":{"message":"hello"}}';
const SIGNATURE = 'sha256=a950142e836abb4e35bf2bcb2343d8de51b50de303fa05a6230fa81caa629a21';
const AT = new Date(Number(TIMESTAMP) * 1000);
const headers = { 'x-service-timestamp': TIMESTAMP, 'x-service-signature': SIGNATURE };

const reason = (error: unknown) => (error instanceof WebhookVerificationError ? error.reason : String(error));

describe('verifyWebhook', () => {
  test("CONTRACT's test vector: the signature, and the verified event", async () => {
    assert.equal(`sha256=${await computeSignature(SECRET, TIMESTAMP, BODY)}`, SIGNATURE);
    const event = await verifyWebhook(new TextEncoder().encode(BODY), headers, SECRET, { now: AT });
    assert.deepEqual(event, {
      id: 'dlv_01',
      event: 'ping',
      created_at: '2026-01-01T00:00:00Z',
      partner_id: 'acme',
      data: { message: 'hello' },
    });
    // Headers as a fetch Headers object, or as Node's (any case).
    assert.equal((await verifyWebhook(BODY, new Headers(headers), SECRET, { now: AT })).id, 'dlv_01');
    assert.equal(
      (await verifyWebhook(BODY, { 'X-Service-Timestamp': TIMESTAMP, 'X-Service-Signature': SIGNATURE }, SECRET, { now: AT })).id,
      'dlv_01',
    );
  });

  test('the 5-minute tolerance is symmetric', async () => {
    for (const offset of [-300, 300]) {
      await verifyWebhook(BODY, headers, SECRET, { now: new Date(AT.getTime() + offset * 1000) });
    }
    for (const offset of [-301, 301]) {
      await assert.rejects(
        verifyWebhook(BODY, headers, SECRET, { now: new Date(AT.getTime() + offset * 1000) }),
        (e) => reason(e) === 'stale_timestamp',
      );
    }
  });

  test('a changed body, a wrong secret, a missing prefix or header, a bad timestamp are refused', async () => {
    const refused = async (body: string, given: Record<string, string>, secrets: string | string[], why: string) =>
      assert.rejects(verifyWebhook(body, given, secrets, { now: AT }), (e) => reason(e) === why);
    await refused(BODY.replace('hello', 'hellO'), headers, SECRET, 'bad_signature');
    await refused(`${BODY}\n`, headers, SECRET, 'bad_signature');
    await refused(BODY, headers, 'f'.repeat(64), 'bad_signature');
    await refused(BODY, { ...headers, 'x-service-signature': SIGNATURE.slice(7) }, SECRET, 'bad_signature');
    await refused(BODY, { 'x-service-timestamp': TIMESTAMP }, SECRET, 'missing_header');
    await refused(BODY, { ...headers, 'x-service-timestamp': '1767225600.5' }, SECRET, 'bad_timestamp');
  });

  test('several secrets: during rotation both the new and the previous one verify', async () => {
    assert.equal((await verifyWebhook(BODY, headers, ['e'.repeat(64), SECRET], { now: AT })).id, 'dlv_01');
    assert.equal((await verifyWebhook(BODY, headers, [SECRET, 'e'.repeat(64)], { now: AT })).id, 'dlv_01');
  });

  test('signTestWebhook produces what verifyWebhook accepts', async () => {
    const event: WebhookEvent = {
      id: 'dlv_x',
      event: 'customer.deleted',
      created_at: '2026-01-01T00:00:00Z',
      partner_id: 'acme',
      data: { customer_id: 'c1', immediate: true },
    };
    const signed = await signTestWebhook(event, SECRET);
    assert.deepEqual(await verifyWebhook(signed.body, signed.headers, SECRET), event);
    assert.equal(signed.headers['x-service-delivery'], 'dlv_x');
  });

  test('handleOnce runs a delivery id once, and again after a failed attempt', async () => {
    const store = memoryDedupeStore();
    const event = { id: 'dlv_1', event: 'ping', created_at: '', partner_id: 'p', data: {} };
    let runs = 0;
    await assert.rejects(
      handleOnce(event, store, () => {
        runs++;
        throw new Error('database down');
      }),
    );
    assert.deepEqual(await handleOnce(event, store, () => ++runs), { handled: true, result: 2 });
    assert.deepEqual(await handleOnce(event, store, () => ++runs), { handled: false });
    assert.equal(runs, 2);
  });
});

// Deliveries from the real server, verified by the SDK, including across a secret rotation.
const target = testDatabases()[0];
if (target) {
  describe('verifyWebhook on deliveries from the server', () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    let lab: Tokens;
    before(async () => {
      server = await startTestServer(target, { env: { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE } });
      receiver = await new WebhookReceiver().listen();
      lab = await partnerWithModes(server, 'sdk-lab', { allow_private_webhooks: true });
    });
    after(async () => {
      await receiver.close();
      await server.stop();
    });

    test('a test ping and a real event verify; after rotation the new secret verifies and the old one no longer does', async () => {
      // Configured, tested and rotated through the SDK itself.
      const client = new Tenantry({ apiKey: lab.liveKey, baseUrl: server.partnerUrl });
      const configured = await client.webhook.update({ url: receiver.url('/sdk') });
      const first = String(configured.signing_secret);
      assert.match(first, /^[0-9a-f]{64}$/);
      await client.webhook.test();
      const ping = receiver.of('ping').at(-1);
      assert.ok(ping);
      assert.equal((await verifyWebhook(ping.raw, ping.headers, first)).event, 'ping');

      const second = (await client.webhook.rotateSecret()).signing_secret;
      assert.ok(second && second !== first);
      await client.customers.create({ id: 'sdk-c1', owner: { username: 'o', email: 'o@sdk-c1.example' } });
      const ready = await eventually(
        async () => receiver.of('customer.ready').find((d) => d.body.data.customer_id === 'sdk-c1'),
        (d) => d !== undefined,
      );
      assert.ok(ready);
      const event = await verifyWebhook(ready.raw, ready.headers, [second, first]);
      assert.equal(event.event, 'customer.ready');
      assert.equal(summary(event), 'sdk-c1 is active (project default ready)');
      await assert.rejects(verifyWebhook(ready.raw, ready.headers, first), (e) => reason(e) === 'bad_signature');
      // The attempt's outcome is written just after the receiver answers: poll the log until it is there.
      const attempts = await eventually(
        async () => {
          const all: unknown[] = [];
          for await (const attempt of client.webhook.deliveries.list({ limit: 1 })) all.push(attempt);
          return all;
        },
        (all) => all.length >= 2,
      );
      assert.ok(attempts.length >= 2, 'the delivery log lists the ping and the event, page by page');
    });
  });
}
