import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { TEST_CA_FILE, WebhookReceiver } from '../../test/webhook-receiver.ts';
import { DestinationGuard } from './destination.ts';
import { WebhookSender } from './sender.ts';

/**
 * The sender's TLS trust: the operator's extra CA (TENANTRY_WEBHOOK_CA_FILE) is trusted along with
 * the public ones, nothing else is, and the host name is still checked.
 */
describe('webhook sender TLS', () => {
  const receiver = new WebhookReceiver();
  const guard = new DestinationGuard({ resolve: async () => ['127.0.0.1'] });
  const delivery = (url: string) => ({
    url,
    allowPrivate: true,
    body: JSON.stringify({ id: 'dlv_1', event: 'ping', created_at: '2026-01-01T00:00:00Z', partner_id: 'p', data: { message: 'hello' } }),
    headers: {},
  });
  before(async () => {
    await receiver.listen();
  });
  after(async () => {
    await receiver.close();
  });

  test('with the extra CA, deliveries to a receiver certified by it are sent, concurrently and again later', async () => {
    const sender = new WebhookSender({ guard, extraCa: readFileSync(TEST_CA_FILE, 'utf8') });
    try {
      const results = await Promise.all(Array.from({ length: 20 }, () => sender.send(delivery(receiver.url()))));
      assert.deepEqual(new Set(results.map((r) => r.status)), new Set([200]));
      const again = await sender.send(delivery(receiver.url()));
      assert.equal(again.delivered, true);
    } finally {
      sender.close();
    }
  });

  test('without it, the test CA is not trusted and the error says how to fix it', async () => {
    const sender = new WebhookSender({ guard });
    try {
      const result = await sender.send(delivery(receiver.url()));
      assert.equal(result.delivered, false);
      assert.match(result.error ?? '', /not trusted.*TENANTRY_WEBHOOK_CA_FILE/);
    } finally {
      sender.close();
    }
  });

  test('a trusted certificate for another name is refused', async () => {
    const sender = new WebhookSender({ guard, extraCa: readFileSync(TEST_CA_FILE, 'utf8') });
    try {
      const result = await sender.send(delivery(receiver.url('/hooks', 'elsewhere.example')));
      assert.equal(result.delivered, false);
      assert.match(result.error ?? '', /ERR_TLS_CERT_ALTNAME_INVALID/);
    } finally {
      sender.close();
    }
  });
});
