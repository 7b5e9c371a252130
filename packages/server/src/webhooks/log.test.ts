import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertError } from '../../test/client.ts';
import { type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, type Tokens } from '../../test/provisioning.ts';
import { type DeliveryRecord, useWebhookWorld } from '../../test/webhook-fixture.ts';
import { verifyDelivery, type WebhookReceiver } from '../../test/webhook-receiver.ts';
import { appendAttempts } from './store.ts';

for (const target of testDatabases()) {
  describe(`webhooks: test ping, rotation and the log [${target.name}]`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    let lab: Tokens;
    let plain: Tokens;
    const { api, configure, deliveries, received, settled, secretOf } = useWebhookWorld(target, (world) => {
      ({ server, receiver, lab, plain } = world);
    });

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
        .selectFrom('webhook_deliveries')
        .select('state')
        .where('id', '=', first?.body.id ?? '')
        .executeTakeFirst();
      assert.equal(row?.state, 'skipped', 'no longer pending: nothing is left to deliver');
    });

    test('a retry is sent only if the receiver still wants it: disabled, or filtered out since, it is skipped', async () => {
      await secretOf(lab.live, receiver.url('/changed'));
      receiver.answer = (d) => (d.path === '/changed' ? 503 : 200);
      await activeCustomer(server, lab.live, 'changing-mind');
      const [first] = await received((d) => d.path === '/changed');
      assert.ok(first);
      await settled();
      const stateOf = async (id: string) =>
        (await server.database.db.selectFrom('webhook_deliveries').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;
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
}
