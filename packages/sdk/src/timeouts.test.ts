import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import { type ClientOptions, Tenantry, TenantryConnectionError, TenantryError, TenantryTimeoutError } from './index.ts';
import { type Answer, scriptedServer } from './testing/scripted-server.ts';

/** A client of a scripted server whose waits between attempts are recorded and instant. */
async function setup(t: TestContext, answers: Answer[], options: Partial<ClientOptions> = {}, tokenAnswers: Answer[] = []) {
  const server = await scriptedServer(answers, tokenAnswers);
  t.after(() => server.stop());
  const sleeps: number[] = [];
  const client = new Tenantry({
    apiKey: 'tnt_live_x',
    baseUrl: server.baseUrl,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    ...options,
  });
  return { server, client, sleeps };
}

describe('timeouts', () => {
  test("a server that never answers: the client's timeout ends the call with TenantryTimeoutError", async (t) => {
    const c = await setup(t, ['hang'], { timeout: 150, maxRetries: 0 });
    const error = await c.client.customers.get('globex').catch((e: unknown) => e);
    assert.ok(error instanceof TenantryTimeoutError, String(error));
    assert.ok(error instanceof TenantryConnectionError && error instanceof TenantryError);
    assert.equal(error.code, 'TIMEOUT');
    assert.equal(error.status, 0);
    assert.equal(error.timeout, 150);
    assert.equal(error.url, `${c.server.baseUrl}/api/public/v1/customers/globex`);
    assert.match(error.message, /GET http:\/\/127\.0\.0\.1:\d+\/api\/public\/v1\/customers\/globex: no answer within 150 ms/);
  });

  test("a call's own timeout replaces the client's", async (t) => {
    const c = await setup(t, ['hang'], { timeout: 600_000, maxRetries: 0 });
    const error = await c.client.customers.get('globex', { timeout: 100 }).catch((e: unknown) => e);
    assert.ok(error instanceof TenantryTimeoutError, String(error));
    assert.equal(error.timeout, 100);
  });

  test('the timeout covers the body too: headers, then silence', async (t) => {
    const c = await setup(t, ['hang-body'], { timeout: 150, maxRetries: 0 });
    await assert.rejects(c.client.auth.whoami(), TenantryTimeoutError);
  });

  test('a timed-out read is retried, and the answer of the retry is returned', async (t) => {
    const c = await setup(t, ['hang', { status: 200 }], { timeout: 150 });
    assert.deepEqual({ ...(await c.client.customers.get('globex')) }, { ok: true });
    assert.equal(c.server.seen.length, 2);
    assert.equal(c.sleeps.length, 1);
  });

  test('a token exchange that never answers is bounded by the call', async (t) => {
    const c = await setup(t, [], { timeout: 600_000, maxRetries: 0 }, ['hang']);
    const error = await c.client.auth.whoami({ timeout: 100 }).catch((e: unknown) => e);
    assert.ok(error instanceof TenantryTimeoutError, String(error));
    assert.equal(error.url, `${c.server.baseUrl}/api/public/v1/auth/token`);
  });
});

describe('aborting with a signal', () => {
  test("mid-request: the call rejects with the signal's reason, and nothing is retried", async (t) => {
    const c = await setup(t, ['hang', { status: 200 }]);
    const stop = new AbortController();
    const call = c.client.customers.get('globex', { signal: stop.signal });
    await c.server.arrived(1);
    const reason = new Error('the user went away');
    stop.abort(reason);
    await assert.rejects(call, (error) => error === reason);
    assert.equal(c.server.seen.length, 1);
  });

  test('mid-wait before a retry: the wait ends at once, with an AbortError when no reason is given', async (t) => {
    const server = await scriptedServer([{ status: 503, code: 'UNAVAILABLE', retryAfter: 30 }]);
    t.after(() => server.stop());
    let sleeping: () => void = () => {};
    const asleep = new Promise<void>((resolve) => {
      sleeping = resolve;
    });
    const waits: number[] = [];
    // A wait that would last until the end of the test unless the signal ends it.
    const sleep = (ms: number) => {
      waits.push(ms);
      sleeping();
      return new Promise<void>(() => {});
    };
    const client = new Tenantry({ apiKey: 'tnt_live_x', baseUrl: server.baseUrl, sleep });
    const stop = new AbortController();
    const call = client.customers.create({ id: 'globex', owner: { username: 'o', email: 'o@globex.example' } }, { signal: stop.signal });
    await asleep;
    stop.abort();
    await assert.rejects(call, (error) => error instanceof Error && error.name === 'AbortError');
    assert.deepEqual(waits, [30_000]);
    assert.equal(server.seen.length, 1);
  });

  test('an aborted signal sends nothing', async (t) => {
    const c = await setup(t, []);
    const reason = new Error('already over');
    await assert.rejects(c.client.customers.get('globex', { signal: AbortSignal.abort(reason) }), (error) => error === reason);
    assert.equal(c.server.exchanges.length + c.server.seen.length, 0, 'not even a token exchange');
  });

  test('one signal shared by many concurrent calls aborts them all', async (t) => {
    const c = await setup(
      t,
      Array.from({ length: 20 }, () => 'hang' as const),
    );
    const stop = new AbortController();
    const calls = Array.from({ length: 20 }, (_, i) => c.client.customers.get(`c${i}`, { signal: stop.signal }));
    await c.server.arrived(20);
    stop.abort(new Error('shutting down'));
    const results = await Promise.allSettled(calls);
    assert.deepEqual(
      results.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'resolved')),
      Array.from({ length: 20 }, () => 'shutting down'),
    );
  });
});

describe('connection failures', () => {
  test('refused: retried with backoff, and a server back in time answers', async (t) => {
    const server = await scriptedServer([]);
    t.after(() => server.stop());
    const sleeps: number[] = [];
    const client = new Tenantry({
      apiKey: 'tnt_live_x',
      baseUrl: server.baseUrl,
      sleep: async (ms) => {
        sleeps.push(ms);
        if (sleeps.length === 2) await server.restart();
      },
    });
    await client.auth.whoami();
    await server.stop();
    assert.deepEqual({ ...(await client.customers.get('globex')) }, { ok: true });
    assert.equal(sleeps.length, 2, 'two refused attempts, then the answer');
    assert.ok(sleeps.every((ms) => ms > 0 && ms <= 30_000));
  });

  test('refused until the retries run out: a TenantryConnectionError naming the URL, with the cause', async (t) => {
    const c = await setup(t, []);
    await c.client.auth.whoami();
    await c.server.stop();
    const error = await c.client.customers.get('globex').catch((e: unknown) => e);
    assert.ok(error instanceof TenantryConnectionError, String(error));
    assert.ok(!(error instanceof TenantryTimeoutError));
    assert.equal(error.code, 'CONNECTION_ERROR');
    assert.equal(error.status, 0);
    assert.equal(error.url, `${c.server.baseUrl}/api/public/v1/customers/globex`);
    assert.match(error.message, /^GET http:\/\/127\.0\.0\.1:\d+\/api\/public\/v1\/customers\/globex failed: .*ECONNREFUSED/);
    assert.ok(error.cause instanceof Error);
    assert.equal(c.sleeps.length, 3, 'maxRetries (3) retries');
  });

  test('a token exchange refused is retried, then names the token URL', async (t) => {
    const c = await setup(t, []);
    await c.server.stop();
    const error = await c.client.auth.whoami().catch((e: unknown) => e);
    assert.ok(error instanceof TenantryConnectionError, String(error));
    assert.equal(error.url, `${c.server.baseUrl}/api/public/v1/auth/token`);
    assert.equal(c.sleeps.length, 3);
  });

  test('reset: a write is retried with the same automatic Idempotency-Key', async (t) => {
    const c = await setup(t, ['reset', { status: 200 }]);
    await c.client.customers.suspend('globex');
    const keys = c.server.seen.map((s) => s.headers['idempotency-key']);
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1]);
    assert.match(String(keys[0]), /^[0-9a-f-]{36}$/);
  });

  test('reset on the last attempt: the error says ECONNRESET', async (t) => {
    const c = await setup(t, ['reset'], { maxRetries: 0 });
    const error = await c.client.customers.get('globex').catch((e: unknown) => e);
    assert.ok(error instanceof TenantryConnectionError, String(error));
    assert.match(error.message, /ECONNRESET/);
  });

  test('TLS spoken to a plain HTTP port: a TenantryConnectionError with the TLS cause', async (t) => {
    const c = await setup(t, [], { maxRetries: 0 });
    const baseUrl = c.server.baseUrl.replace('http:', 'https:');
    const client = new Tenantry({ apiKey: 'tnt_live_x', baseUrl, maxRetries: 0 });
    const error = await client.auth.whoami().catch((e: unknown) => e);
    assert.ok(error instanceof TenantryConnectionError, String(error));
    assert.ok(error.url.startsWith(`${baseUrl}/`));
    assert.ok(error.cause !== undefined);
  });

  test('a host name that does not resolve: a TenantryConnectionError', async () => {
    const client = new Tenantry({ apiKey: 'tnt_live_x', baseUrl: 'http://tenantry-sdk-test.invalid', maxRetries: 0, timeout: 10_000 });
    const error = await client.auth.whoami().catch((e: unknown) => e);
    assert.ok(error instanceof TenantryConnectionError, String(error));
    assert.match(error.message, /tenantry-sdk-test\.invalid/);
  });
});

describe('Retry-After is capped', () => {
  test('Retry-After: 3600 is not slept: the error comes back at once with retryAfter', async (t) => {
    const c = await setup(t, [{ status: 503, code: 'UNAVAILABLE', retryAfter: 3600 }]);
    const error = await c.client.customers.get('globex').catch((e: unknown) => e);
    assert.ok(error instanceof TenantryError && error.code === 'UNAVAILABLE', String(error));
    assert.equal(error.retryAfter, 3600);
    assert.deepEqual(c.sleeps, []);
    assert.equal(c.server.seen.length, 1);
  });

  test('up to the cap (60 s by default) the client waits as asked', async (t) => {
    const c = await setup(t, [{ status: 429, code: 'RATE_LIMITED', retryAfter: 60 }]);
    await c.client.customers.get('globex');
    assert.deepEqual(c.sleeps, [60_000]);
  });

  test('maxRetryAfter raises the cap', async (t) => {
    const c = await setup(t, [{ status: 503, code: 'PARTNER_NOT_READY', retryAfter: 3600 }], { maxRetryAfter: 3600 });
    await c.client.customers.get('globex');
    assert.deepEqual(c.sleeps, [3_600_000]);
  });
});

describe('the event stream', () => {
  test('a connection failure reconnects rather than ending the stream', async (t) => {
    const event = { id: 'dlv_1', event: 'ping', created_at: '', partner_id: 'p', data: { message: 'hi' } };
    const c = await setup(t, ['reset', { status: 200, events: `id: dlv_1\ndata: ${JSON.stringify(event)}\n\n` }], { maxRetries: 0 });
    const errors: unknown[] = [];
    const stream = c.client.events.stream({ onReconnect: ({ error }) => errors.push(error) });
    for await (const received of stream) {
      assert.equal(received.id, 'dlv_1');
      break;
    }
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof TenantryConnectionError);
  });
});
