import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, createPartner, exchange, issueKey, operatorApi, PARTNER_API, partnerApi } from '../../test/client.ts';
import { checkContract } from '../../test/contract.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import { idFloor, idTimeMs } from '../infra/ids.ts';

interface Message {
  id?: string;
  event?: string;
  data?: string;
}

/** A reader of `GET /events/stream` over a real connection: messages, comments, and the end. */
async function openStream(server: TestServer, token: string, lastEventId?: string) {
  const controller = new AbortController();
  const url = `${server.partnerUrl}${PARTNER_API}/events/stream`;
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (lastEventId) headers['last-event-id'] = lastEventId;
  const response = await fetch(url, { headers, signal: controller.signal });
  assert.equal(response.status, 200, await (response.ok ? '' : response.text()));
  checkContract('GET', url, response.status, response.headers, undefined);
  assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let raw = '';
  let ended = false;
  const messages: Message[] = [];
  const pump = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        raw += decoder.decode(value, { stream: true });
        let end = raw.indexOf('\n\n');
        while (end !== -1) {
          const block = raw.slice(0, end);
          raw = raw.slice(end + 2);
          end = raw.indexOf('\n\n');
          const message: Message = {};
          for (const line of block.split('\n')) {
            const [field, ...rest] = line.split(': ');
            if (field === 'id' || field === 'event' || field === 'data') message[field] = rest.join(': ');
            if (line.startsWith(':')) messages.push({ event: `comment${line}` });
          }
          if (message.data !== undefined) messages.push(message);
        }
      }
    } catch {
      // aborted by close()
    }
    ended = true;
  })();
  const events = () => messages.filter((m) => m.data !== undefined).map((m) => JSON.parse(m.data ?? '') as { id: string; event: string });
  return {
    response,
    messages,
    events,
    ended: () => ended,
    /** Waits (real time, bounded) until `check` holds for what arrived. */
    async until(check: () => boolean, what: string, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!check()) {
        assert.ok(Date.now() < deadline, `timed out waiting for ${what}; got ${JSON.stringify(messages)}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    async close() {
      controller.abort();
      await pump;
    },
  };
}

for (const target of testDatabases()) {
  describe(`GET /events/stream (${target.name})`, () => {
    let server: TestServer;
    let acme: Tokens;
    before(async () => {
      server = await startTestServer(target, { eventStreams: { heartbeatMs: 200, maxPerPartner: 3 } });
      acme = await partnerWithModes(server, 'streamer');
    });
    after(() => server.stop());

    test('sends new events of the token’s mode only, from when it opened, each as id, event and the webhook body', async () => {
      await activeCustomer(server, acme.test, 'before-open');
      const stream = await openStream(server, acme.test);
      await activeCustomer(server, acme.live, 'live-one');
      await activeCustomer(server, acme.test, 'test-one');
      await stream.until(() => (stream.events() ?? []).length >= 1, 'the test event');
      const [first] = stream.events() ?? [];
      assert.equal(first?.event, 'customer.ready');
      assert.equal(
        (first as unknown as { data: { customer_id: string } }).data.customer_id,
        'test-one',
        'not the live event, not one from before',
      );
      const message = stream.messages.find((m) => m.data !== undefined);
      assert.equal(message?.id, first?.id);
      assert.equal(message?.event, 'customer.ready');
      // The same bytes as the event list (and a webhook delivery) carry.
      const listed = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/events?type=customer.ready', { token: acme.test });
      assert.equal(message?.data, JSON.stringify(listed.body.data.find((e) => e.id === first?.id)));
      await stream.close();
    });

    test('resumes with Last-Event-ID after a dropped connection: every event made meanwhile arrives, the last one seen does not repeat', async () => {
      const first = await openStream(server, acme.test);
      await activeCustomer(server, acme.test, 'resume-a');
      await first.until(() => (first.events() ?? []).some((e) => e.event === 'customer.ready'), 'event a');
      const seen = (first.events() ?? []).at(-1);
      await first.close();
      // Disconnected: these happen while nobody listens.
      await activeCustomer(server, acme.test, 'resume-b');
      await activeCustomer(server, acme.test, 'resume-c');
      await partnerApi(server, 'POST', '/customers/resume-b/suspend', { token: acme.test, body: {} });
      const second = await openStream(server, acme.test, seen?.id);
      const ids = () => (second.events() ?? []).map((e) => (e as unknown as { data: { customer_id: string } }).data.customer_id);
      const after = () => second.events().filter((e) => e.id > (seen?.id ?? ''));
      await second.until(() => after().length >= 3, 'the three missed events');
      assert.deepEqual(
        after().map((e) => `${e.event} ${(e as unknown as { data: { customer_id: string } }).data.customer_id}`),
        ['customer.ready resume-b', 'customer.ready resume-c', 'customer.suspended resume-b'],
      );
      // At least once: the seconds before Last-Event-ID may come again (a client drops ids it has), the event itself not.
      assert.ok(!second.events().some((e) => e.id === seen?.id), 'the event named in Last-Event-ID is not sent again');
      assert.ok(ids().length >= 3);
      await second.close();
    });

    test('an event that commits late (its id older than one already sent) still arrives', async () => {
      const stream = await openStream(server, acme.test);
      await activeCustomer(server, acme.test, 'late-newer');
      await stream.until(() => (stream.events() ?? []).length >= 1, 'the newer event');
      const newer = (stream.events() ?? [])[0];
      // A transaction that minted its id a second before the newer one, and commits only now.
      const lateId = `${idFloor('delivery', idTimeMs(newer?.id ?? '') - 1_000).slice(0, -16)}zzzzzzzzzzzzzzzz`;
      await server.database.db
        .insertInto('events')
        .values({
          id: lateId,
          partner_id: acme.id,
          mode: 'test',
          type: 'customer.plan_changed',
          data: JSON.stringify({ customer_id: 'late-newer', plan_id: 'standard' }),
          created_at: server.clock.now(),
        })
        .execute();
      await stream.until(() => (stream.events() ?? []).some((e) => e.id === lateId), 'the late event');
      await stream.close();
    });

    test('a quiet stream sends heartbeat comments', async () => {
      const stream = await openStream(server, acme.test);
      await stream.until(() => stream.messages.some((m) => m.event === 'comment: heartbeat'), 'a heartbeat');
      await stream.close();
    });

    test('refusals: no token, a token without customers:read, a malformed Last-Event-ID, too many open streams', async () => {
      assertError(await partnerApi(server, 'GET', '/events/stream'), 401, 'UNAUTHORIZED');
      await createPartner(server, 'stream-usage', { scopes: ['usage:read'] });
      const usageOnly = (await exchange(server, await issueKey(server, 'stream-usage'))).body.access_token;
      assertError(await partnerApi(server, 'GET', '/events/stream', { token: usageOnly }), 403, 'FORBIDDEN');
      assertError(
        await partnerApi(server, 'GET', '/events/stream', { token: acme.test, headers: { 'last-event-id': 'dlv_nope' } }),
        400,
        'VALIDATION_ERROR',
      );
      const open = [await openStream(server, acme.live), await openStream(server, acme.live), await openStream(server, acme.test)];
      // The limit is per partner, whichever mode.
      assertError(await partnerApi(server, 'GET', '/events/stream', { token: acme.test }), 429, 'RATE_LIMITED');
      for (const stream of open) await stream.close();
      // Closed by their clients, they no longer count: a new one opens.
      const deadline = Date.now() + 10_000;
      for (;;) {
        const controller = new AbortController();
        const again = await fetch(`${server.partnerUrl}${PARTNER_API}/events/stream`, {
          headers: { authorization: `Bearer ${acme.test}` },
          signal: controller.signal,
        });
        if (again.status === 200) {
          controller.abort();
          break;
        }
        await again.text();
        assert.equal(again.status, 429);
        assert.ok(Date.now() < deadline, 'the streams closed by their clients were released');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });

    test('the stream ends when its partner is suspended and when its token expires', async () => {
      const other = await partnerWithModes(server, 'stream-ends');
      const suspended = await openStream(server, other.test);
      await operatorApi(server, 'POST', '/partners/stream-ends/suspend');
      await suspended.until(() => suspended.ended() === true, 'the end after suspension');
      await operatorApi(server, 'POST', '/partners/stream-ends/unsuspend');

      const expiring = await openStream(server, acme.test);
      server.clock.advance(901_000);
      await expiring.until(() => expiring.ended() === true, 'the end after the token expired');
      acme.test = (await exchange(server, acme.testKey)).body.access_token;
      acme.live = (await exchange(server, acme.liveKey)).body.access_token;
    });

    test('shutting the server down ends open streams (the drain does not wait for them)', async () => {
      const own = await startTestServer(target);
      const tokens = await partnerWithModes(own, 'stream-shutdown');
      const stream = await openStream(own, tokens.test);
      await own.stop();
      await stream.until(() => stream.ended() === true, 'the end at shutdown');
    });
  });
}
