import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { operatorApi } from '../../server/test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../server/test/harness.ts';
import { partnerWithModes, type Tokens } from '../../server/test/provisioning.ts';
import { Tenantry, TenantryError } from './index.ts';

/** A fetch that counts token exchanges. */
function countingFetch() {
  const counter = {
    exchanges: 0,
    fetch: ((input: string | URL | Request, init?: RequestInit) => {
      if (String(input).endsWith('/auth/token')) counter.exchanges++;
      return fetch(input, init);
    }) as typeof fetch,
  };
  return counter;
}

const target = testDatabases()[0];
if (target) {
  describe('Tenantry client against the real server', () => {
    let server: TestServer;
    let p: Tokens;
    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'sdk-client');
    });
    after(() => server.stop());

    test('many concurrent calls share one exchange; the token is reused, then refreshed 60 s before expiry', async () => {
      const counter = countingFetch();
      let now = Date.now();
      const client = new Tenantry({ apiKey: p.liveKey, baseUrl: server.partnerUrl, fetch: counter.fetch, now: () => now });
      const answers = await Promise.all(Array.from({ length: 25 }, () => client.auth.whoami()));
      assert.equal(answers.length, 25);
      assert.equal(counter.exchanges, 1, 'single-flight: one exchange for 25 calls');
      await client.auth.whoami();
      assert.equal(counter.exchanges, 1, 'cached');
      now += (900 - 61) * 1000;
      await client.auth.whoami();
      assert.equal(counter.exchanges, 1, 'still more than 60 s left');
      now += 2_000;
      await client.auth.whoami();
      assert.equal(counter.exchanges, 2, 'refreshed within 60 s of expiry');
    });

    test('a 401 drops the token, exchanges once and replays once; a revoked key stops after that', async () => {
      const counter = countingFetch();
      const client = new Tenantry({ apiKey: p.liveKey, baseUrl: server.partnerUrl, fetch: counter.fetch });
      await client.auth.whoami();
      // The server's clock passes the token's expiry; the client's does not, so only a 401 can tell it.
      server.clock.advance(16 * 60_000);
      await client.auth.whoami();
      assert.equal(counter.exchanges, 2, 'one more exchange, and the call replayed');

      const key = await operatorApi<{ data: { key: string; kid: string } }>(server, 'POST', '/partners/sdk-client/keys', { body: {} });
      const revocable = new Tenantry({ apiKey: key.body.data.key, baseUrl: server.partnerUrl, fetch: counter.fetch });
      await revocable.auth.whoami();
      const revoked = await operatorApi(server, 'POST', `/partners/sdk-client/keys/${key.body.data.kid}/revoke`);
      assert.equal(revoked.status, 200, revoked.text);
      server.clock.advance(16 * 60_000);
      const before = counter.exchanges;
      await assert.rejects(revocable.auth.whoami(), (e) => e instanceof TenantryError && e.status === 401 && e.code === 'UNAUTHORIZED');
      assert.equal(counter.exchanges - before, 1, 'exchanged once, then stopped');
    });

    test('typed errors carry code, status, request id and details; a success its request id on lastResponse', async () => {
      const client = new Tenantry({ apiKey: p.liveKey, baseUrl: server.partnerUrl });
      const me = await client.auth.whoami();
      assert.match(me.lastResponse.requestId ?? '', /^req_/);
      assert.equal(me.lastResponse.statusCode, 200);
      const error = await client.customers.get('nobody-here').catch((e: unknown) => e);
      assert.ok(error instanceof TenantryError);
      assert.equal(error.code, 'NOT_FOUND');
      assert.equal(error.status, 404);
      assert.match(error.requestId ?? '', /^req_/);
      // The server's validation is under test here, not the types: the body is deliberately incomplete.
      const invalid = await client.customers.create({ id: 'Bad Id' } as never).catch((e: unknown) => e);
      assert.ok(invalid instanceof TenantryError && invalid.code === 'VALIDATION_ERROR' && Array.isArray(invalid.details?.errors));
    });

    test('for await walks every page; operations.wait polls to the end', async () => {
      const client = new Tenantry({ apiKey: p.testKey, baseUrl: server.partnerUrl });
      const ids = ['sdk-a', 'sdk-b', 'sdk-c', 'sdk-d', 'sdk-e'];
      for (const id of ids) {
        const { operation } = await client.customers.create({ id, owner: { username: 'o', email: `o@${id}.example` } });
        const done = await client.operations.wait(id, operation.id, { intervalMs: 10, timeoutMs: 10_000 });
        assert.equal(done.status, 'succeeded');
      }
      const seen: string[] = [];
      for await (const customer of client.customers.list({ limit: 2 })) seen.push(customer.id);
      assert.deepEqual(seen, ids);
    });
  });
}

/** A stand-in server that answers a scripted sequence, to drive each retry rule. */
async function scripted(answers: { status: number; code?: string; retryAfter?: number }[]) {
  const seen: { method: string; url: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((request, response) => {
    if (request.url?.endsWith('/auth/token')) {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: 't', expires_in: 900 }));
      return;
    }
    seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers });
    const answer = answers.shift() ?? { status: 200 };
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': 'req_1' };
    if (answer.retryAfter !== undefined) headers['retry-after'] = String(answer.retryAfter);
    const body = answer.code
      ? { status: 'error', error: { code: answer.code, message: answer.code, request_id: 'req_1' } }
      : { status: 'success', data: { ok: true } };
    response.writeHead(answer.status, headers).end(JSON.stringify(body));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const sleeps: number[] = [];
  const client = new Tenantry({
    apiKey: 'tnt_live_x',
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
  return { client, seen, sleeps, close: () => server.close() };
}

describe('retries follow the error table', () => {
  const cases: {
    name: string;
    method: 'GET' | 'POST';
    answers: { status: number; code?: string; retryAfter?: number }[];
    requests: number;
    ok: boolean;
  }[] = [
    { name: 'BUSY after Retry-After', method: 'POST', answers: [{ status: 409, code: 'BUSY', retryAfter: 1 }], requests: 2, ok: true },
    {
      name: 'IDEMPOTENCY_KEY_IN_PROGRESS',
      method: 'POST',
      answers: [{ status: 409, code: 'IDEMPOTENCY_KEY_IN_PROGRESS', retryAfter: 2 }],
      requests: 2,
      ok: true,
    },
    { name: 'RATE_LIMITED', method: 'GET', answers: [{ status: 429, code: 'RATE_LIMITED', retryAfter: 3 }], requests: 2, ok: true },
    {
      name: 'GPU_USAGE_UNAVAILABLE',
      method: 'POST',
      answers: [{ status: 503, code: 'GPU_USAGE_UNAVAILABLE', retryAfter: 5 }],
      requests: 2,
      ok: true,
    },
    {
      name: 'an unknown 503 code, by its status',
      method: 'GET',
      answers: [{ status: 503, code: 'SOMETHING_NEW', retryAfter: 1 }],
      requests: 2,
      ok: true,
    },
    { name: 'INTERNAL_ERROR on GET', method: 'GET', answers: [{ status: 500, code: 'INTERNAL_ERROR' }], requests: 2, ok: true },
    {
      name: 'INTERNAL_ERROR on POST (it carries a key)',
      method: 'POST',
      answers: [{ status: 500, code: 'INTERNAL_ERROR' }],
      requests: 2,
      ok: true,
    },
    { name: 'CONFLICT is never retried', method: 'POST', answers: [{ status: 409, code: 'CONFLICT' }], requests: 1, ok: false },
    {
      name: 'IDEMPOTENCY_KEY_REUSED is never retried',
      method: 'POST',
      answers: [{ status: 409, code: 'IDEMPOTENCY_KEY_REUSED' }],
      requests: 1,
      ok: false,
    },
    {
      name: 'VALIDATION_ERROR is never retried',
      method: 'POST',
      answers: [{ status: 400, code: 'VALIDATION_ERROR' }],
      requests: 1,
      ok: false,
    },
    { name: 'FORBIDDEN is never retried', method: 'GET', answers: [{ status: 403, code: 'FORBIDDEN' }], requests: 1, ok: false },
    {
      name: 'retries stop after maxRetries',
      method: 'GET',
      answers: Array.from({ length: 10 }, () => ({ status: 503, code: 'UNAVAILABLE', retryAfter: 1 })),
      requests: 4,
      ok: false,
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const fake = await scripted([...c.answers]);
      try {
        const call = fake.client.request(c.method, '/customers', c.method === 'POST' ? { body: {} } : {});
        if (c.ok) await call;
        else await assert.rejects(call, TenantryError);
        assert.equal(fake.seen.length, c.requests);
        const retryAfter = c.answers[0]?.retryAfter;
        if (c.requests > 1 && retryAfter !== undefined) assert.equal(fake.sleeps[0], retryAfter * 1000);
        if (c.method === 'POST') {
          const keys = new Set(fake.seen.map((s) => s.headers['idempotency-key']));
          assert.equal(keys.size, 1, 'one Idempotency-Key, kept across retries');
          assert.match(String([...keys][0]), /^[0-9a-f-]{36}$/);
        }
      } finally {
        fake.close();
      }
    });
  }
});
