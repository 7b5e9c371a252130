import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Tenantry, verifyWebhook, WebhookVerificationError } from '../../sdk/src/index.ts';
import { runCli } from './cli-runner.ts';
import { exchange, partnerApi } from './client.ts';
import { checkWebhookBody } from './contract.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';
import { activeCustomer, eventually, partnerWithModes, type Tokens } from './provisioning.ts';

/**
 * Webhooks on a laptop, end to end: `tenantry listen` reads the server's event stream and forwards each
 * event to a local receiver, which verifies it with the SDK's `verifyWebhook` and the secret the
 * command printed; `tenantry trigger` makes the sandbox produce the events.
 */
const CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));

interface Received {
  raw: Buffer;
  headers: IncomingHttpHeaders;
}

async function receiver(): Promise<{ server: Server; url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    received.push({ raw: Buffer.concat(chunks), headers: request.headers });
    response.writeHead(204).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hooks`, received };
}

const target = testDatabases()[0];
if (target) {
  describe('tenantry listen and tenantry trigger', () => {
    let server: TestServer;
    let acme: Tokens;
    let hooks: Awaited<ReturnType<typeof receiver>>;
    let listener: ChildProcessWithoutNullStreams;
    const lines: Record<string, unknown>[] = [];
    let stderr = '';
    before(async () => {
      server = await startTestServer(target);
      acme = await partnerWithModes(server, 'laptop');
      hooks = await receiver();
    });
    after(async () => {
      listener?.kill('SIGINT');
      hooks.server.close();
      await server.stop();
    });

    test('listen prints its session secret; trigger customer.ready makes a real event; the receiver verifies it with verifyWebhook', async () => {
      listener = spawn(
        process.execPath,
        [CLI, 'listen', '--api-key', acme.testKey, '--api-url', server.partnerUrl, '--forward-to', hooks.url, '--json'],
        { env: { PATH: process.env.PATH ?? '' } },
      );
      let buffer = '';
      listener.stdout.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        const complete = buffer.split('\n');
        buffer = complete.pop() ?? '';
        for (const line of complete) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
      });
      listener.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const ready = await eventually(
        async () => lines.find((l) => l.ready === true),
        (line) => line !== undefined,
      );
      assert.ok(ready, `listen printed its ready line; stderr: ${stderr}`);
      assert.equal(ready?.mode, 'test');
      assert.equal(ready?.partner_id, 'laptop');
      const secret = String(ready?.signing_secret);
      assert.match(secret, /^[0-9a-f]{64}$/);

      // A live event is not a test key's to see.
      await activeCustomer(server, acme.live, 'live-only');
      const triggered = await runCli(
        ['trigger', 'customer.ready', '--api-key', acme.testKey, '--api-url', server.partnerUrl, '--json'],
        {},
      );
      assert.equal(triggered.code, 0, triggered.stderr);
      const { customer_id: customerId } = JSON.parse(triggered.stdout) as { customer_id: string };

      const delivery = await eventually(
        async () => hooks.received.find((r) => r.headers['x-service-event'] === 'customer.ready'),
        (found) => found !== undefined,
      );
      assert.ok(delivery);
      const event = await verifyWebhook(delivery.raw, delivery.headers as Record<string, string>, [secret]);
      assert.equal(event.event, 'customer.ready');
      if (event.event === 'customer.ready') assert.equal(event.data.customer_id, customerId);
      checkWebhookBody(event);
      // The same body bytes the event list (and a webhook delivery) carry, and the delivery's headers.
      const listed = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/events?type=customer.ready', { token: acme.test });
      assert.equal(delivery.raw.toString('utf8'), JSON.stringify(listed.body.data.find((e) => e.id === event.id)));
      assert.equal(delivery.headers['x-service-delivery'], event.id);
      assert.equal(delivery.headers['content-type'], 'application/json');
      assert.match(String(delivery.headers['x-service-signature']), /^sha256=[0-9a-f]{64}$/);
      await assert.rejects(
        verifyWebhook(delivery.raw, delivery.headers as Record<string, string>, ['0'.repeat(64)]),
        WebhookVerificationError,
      );
      assert.ok(!hooks.received.some((r) => r.raw.toString().includes('live-only')), 'no live event reaches a test listener');
      const forwarded = await eventually(
        async () => lines.find((l) => l.id === event.id),
        (line) => line !== undefined,
      );
      assert.equal(forwarded?.status, 204);
      assert.match(String(forwarded?.forwarded_at), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'when it was forwarded');
    });

    test('trigger makes each documented kind of event, each forwarded and verified', async () => {
      const secret = String(lines.find((l) => l.ready === true)?.signing_secret);
      const kinds = ['customer.suspended', 'customer.quota_changed', 'project.failed', 'customer.deleted'];
      for (const kind of kinds) {
        const result = await runCli(['trigger', kind, '--api-key', acme.testKey, '--api-url', server.partnerUrl], {});
        assert.equal(result.code, 0, `${kind}: ${result.stderr}`);
        assert.match(result.stdout, new RegExp(`^Triggered ${kind.replace('.', '\\.')} for test customer trg-[0-9a-f]{8} of laptop\\n$`));
      }
      const got = await eventually(
        async () => hooks.received.map((r) => String(r.headers['x-service-event'])),
        (names) => kinds.every((kind) => names.includes(kind)),
      );
      assert.ok(got.length >= kinds.length);
      for (const delivery of hooks.received) await verifyWebhook(delivery.raw, delivery.headers as Record<string, string>, [secret]);
    });

    test('trigger refuses a live key, and an event it cannot make names those it can', async () => {
      const live = await runCli(['trigger', 'customer.ready', '--api-key', acme.liveKey, '--api-url', server.partnerUrl], {});
      assert.equal(live.code, 2);
      assert.match(live.stderr, /^tenantry: tenantry trigger needs a test key \(tnt_test_\.\.\.\)/);
      const unknown = await runCli(['trigger', 'customer.exploded', '--api-key', acme.testKey], {});
      assert.equal(unknown.code, 2);
      assert.match(
        unknown.stderr,
        /^tenantry: cannot trigger "customer\.exploded"; these can be triggered: customer\.ready, customer\.failed, /,
      );
      assert.equal(unknown.stderr.trim().split('\n').length, 1);
    });

    test('listen without a server to reach says so in one line', async () => {
      const closed = createServer().listen(0, '127.0.0.1');
      await once(closed, 'listening');
      const port = (closed.address() as { port: number }).port;
      closed.close();
      await once(closed, 'close');
      const result = await runCli(['listen', '--api-key', acme.testKey, '--api-url', `http://127.0.0.1:${port}`], {});
      assert.equal(result.code, 1);
      assert.match(
        result.stderr,
        /^tenantry: cannot reach the partner API at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\); is tenantry serve running\?\n$/,
      );
    });

    test('the SDK stream resumes after the server ends it (token expiry): every event made meanwhile arrives, once', async () => {
      const client = new Tenantry({ apiKey: acme.testKey, baseUrl: server.partnerUrl });
      const stop = new AbortController();
      const seen: string[] = [];
      let dropped = 0;
      let opened = 0;
      const made: Promise<void>[] = [];
      const stream = client.events.stream({
        signal: stop.signal,
        onOpen: () => {
          opened++;
        },
        onReconnect: () => {
          dropped++;
          // Made while the client is disconnected (it waits the server's retry of 1 s before reconnecting).
          if (dropped === 1) {
            made.push(
              (async () => {
                acme.test = (await exchange(server, acme.testKey)).body.access_token;
                await activeCustomer(server, acme.test, 'while-away');
              })(),
            );
          }
        },
      });
      after(() => stop.abort());
      const reading = (async () => {
        for await (const event of stream) {
          seen.push(`${event.event} ${(event.data as { customer_id?: string }).customer_id}`);
          if (seen.includes('customer.ready after-resume')) stop.abort();
        }
      })();
      // The stream starts from when it opened: wait for that before making the first event.
      await eventually(
        async () => opened,
        (n) => n === 1,
      );
      await activeCustomer(server, acme.test, 'before-drop');
      await eventually(
        async () => seen,
        (s) => s.includes('customer.ready before-drop'),
      );
      // The server ends every stream whose token expired; the SDK exchanges its key again and resumes.
      server.clock.advance(901_000);
      await eventually(
        async () => dropped,
        (d) => d >= 1,
      );
      await Promise.all(made);
      await eventually(
        async () => stream.lastEventId,
        () => seen.includes('customer.ready while-away'),
        15_000,
      );
      await activeCustomer(server, acme.test, 'after-resume');
      await reading;
      const counts = new Map<string, number>();
      for (const item of seen) counts.set(item, (counts.get(item) ?? 0) + 1);
      assert.deepEqual(
        ['customer.ready before-drop', 'customer.ready while-away', 'customer.ready after-resume'].map((k) => counts.get(k)),
        [1, 1, 1],
        `each event once: ${JSON.stringify(seen)}`,
      );
    });
  });
}
