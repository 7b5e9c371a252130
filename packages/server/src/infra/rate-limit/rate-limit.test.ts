import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { assertError, createPartner, exchange, issueKey, partnerApi, partnerWithToken } from '../../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';
import { ManualClock } from '../clock.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { describe as describeBucket, step } from './gcra.ts';
import { rateLimitMigrations } from './migrations.ts';
import { createRateLimiter, MAX_RESERVATION, RENEW_FROM } from './rate-limiter.ts';

/** POST /auth/token from a chosen loopback source address (Linux routes all of 127.0.0.0/8 locally). */
function exchangeFrom(localAddress: string, baseUrl: string, apiKey: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ api_key: apiKey });
    const request = httpRequest(
      `${baseUrl}/api/public/v1/auth/token`,
      { method: 'POST', localAddress, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

describe('GCRA token bucket arithmetic', () => {
  test('a full bucket allows exactly `burst` requests at one instant, then refills at the rate', () => {
    const policy = { perMinute: 120, burst: 40 };
    let tat: number | undefined;
    let allowed = 0;
    for (let i = 0; i < 50; i++) {
      const next = step(tat, 0, policy);
      tat = next.tatMs;
      if (next.allowed) allowed++;
    }
    assert.equal(allowed, 40);
    assert.equal(step(tat, 499, policy).allowed, false, 'one request every 500 ms at 120/min');
    assert.equal(step(tat, 500, policy).allowed, true);
    const decision = describeBucket(tat ?? 0, 0, false, policy);
    assert.deepEqual(decision, { allowed: false, limit: 120, remaining: 0, retryAfterS: 1 });
  });
});

for (const target of testDatabases()) {
  describe(`rate limits [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    test('the partner bucket: burst, then 429 RATE_LIMITED with Retry-After; headers count down; refills with time', async () => {
      const partner = await partnerWithToken(server, 'rl-partner', {
        settings: { limits: { rate_limit_per_minute: 60, rate_limit_burst: 5 } },
      });
      const remaining: string[] = [];
      for (let i = 0; i < 5; i++) {
        const result = await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token });
        assert.equal(result.status, 200);
        assert.equal(result.headers.get('x-ratelimit-limit'), '60');
        remaining.push(result.headers.get('x-ratelimit-remaining') ?? '');
      }
      assert.deepEqual(remaining, ['4', '3', '2', '1', '0']);
      const limited = await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token });
      const error = assertError(limited, 429, 'RATE_LIMITED');
      assert.equal(limited.headers.get('retry-after'), '1');
      assert.equal(limited.headers.get('x-ratelimit-remaining'), '0');
      assert.equal(error.details?.limit_per_minute, 60);
      server.clock.advance(1_000);
      assert.equal((await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token })).status, 200);
      assert.equal((await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token })).status, 429);
    });

    test('the default partner limit is 120 per minute with a burst of 40, shared by every token of the partner', async () => {
      const partner = await partnerWithToken(server, 'rl-default');
      const second = (await exchange(server, await issueKey(server, 'rl-default', { mode: 'test' }))).body.access_token;
      const statuses: number[] = [];
      for (let i = 0; i < 41; i++) {
        const token = i % 2 === 0 ? partner.token : second;
        statuses.push((await partnerApi(server, 'GET', '/auth/whoami', { token })).status);
      }
      assert.equal(statuses.filter((s) => s === 200).length, 40);
      assert.equal(statuses[40], 429);
    });

    test('the token endpoint: 10 at once per key, then 429 with Retry-After; 30 per minute after', async () => {
      await createPartner(server, 'rl-token');
      const key = await issueKey(server, 'rl-token');
      const other = await issueKey(server, 'rl-token');
      for (let i = 0; i < 10; i++) assert.equal((await exchange(server, key)).status, 200);
      const limited = await exchange(server, key);
      assertError(limited, 429, 'RATE_LIMITED');
      assert.equal(limited.headers.get('retry-after'), '2');
      assert.equal((await exchange(server, other)).status, 200, 'limits are per key');
      server.clock.advance(2_000);
      assert.equal((await exchange(server, key)).status, 200);
      assert.equal((await exchange(server, key)).status, 429);
    });

    test('guesses are limited per key and source address, and cannot lock the key out for its owner elsewhere', async () => {
      await createPartner(server, 'rl-brute');
      const key = await issueKey(server, 'rl-brute');
      const wrong = `${key.slice(0, -3)}zzz`;
      for (let i = 0; i < 10; i++) assertError(await exchange(server, wrong), 401, 'UNAUTHORIZED');
      assertError(await exchange(server, wrong), 429, 'RATE_LIMITED');
      // The guessing address is slowed down, whatever it sends.
      assertError(await exchange(server, key), 429, 'RATE_LIMITED');
      const fromElsewhere = await exchangeFrom('127.0.0.2', server.partnerUrl, key);
      assert.equal(fromElsewhere.status, 200, `the owner on another address still exchanges: ${fromElsewhere.text}`);
    });

    // Decision 210: on PostgreSQL the key's bucket is charged in the statement that reads the key,
    // only when the secret matched; a key with an address allowlist is charged after the process's check.
    for (const [label, request] of [
      ['a key without an allowlist', {}],
      ['a key with an address allowlist', { allow_cidrs: ['127.0.0.0/8'] }],
    ] as const) {
      test(`${label}: its bucket holds 10 exchanges from every address together, and wrong secrets spend none of it`, async () => {
        const partnerId = `rl-shared-${Object.keys(request).length}`;
        await createPartner(server, partnerId);
        const key = await issueKey(server, partnerId, request);
        const wrong = `${key.slice(0, -3)}zzz`;
        const statuses = async (address: string, apiKey: string, times: number) => {
          const seen: number[] = [];
          for (let i = 0; i < times; i++) seen.push((await exchangeFrom(address, server.partnerUrl, apiKey)).status);
          return seen;
        };
        assert.deepEqual(await statuses('127.0.0.2', wrong, 10), Array(10).fill(401), 'wrong secrets are refused');
        assert.deepEqual(await statuses('127.0.0.3', key, 6), Array(6).fill(200));
        assert.deepEqual(await statuses('127.0.0.4', key, 4), Array(4).fill(200), 'the wrong secrets took none of the 10');
        const fifth = await exchangeFrom('127.0.0.5', server.partnerUrl, key);
        assert.equal(fifth.status, 429, `the key's bucket is empty, whatever the address: ${fifth.text}`);
        assert.equal(JSON.parse(fifth.text).error.code, 'RATE_LIMITED');
        server.clock.advance(2_000);
        assert.equal((await exchangeFrom('127.0.0.6', server.partnerUrl, key)).status, 200, 'one exchange every 2 s after');
        assert.equal((await exchangeFrom('127.0.0.6', server.partnerUrl, key)).status, 429);
      });
    }
  });
}

for (const target of testDatabases()) {
  describe(`a bucket shared by two processes [${target.name}]`, () => {
    test('a busy caller reserves ever larger batches, up to a thousand tokens a statement; together the processes allow exactly what the bucket holds', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      await migrateToLatest(handle.db, rateLimitMigrations);
      let statements = 0;
      const counted = handle.db.withPlugin({
        transformQuery: (args) => args.node,
        transformResult: async (args) => {
          statements++;
          return args.result;
        },
      });
      // The clock stands still: nothing refills, so the bucket holds exactly its burst.
      const clock = new ManualClock(Date.UTC(2026, 10, 1));
      const policy = { perMinute: 60, burst: 20_000 };
      const first = createRateLimiter(counted, false, clock);
      const second = createRateLimiter(counted, false, clock);
      let allowed = 0;
      for (let i = 0; i < 19_000; i++) {
        if ((await (i % 2 === 0 ? first : second).take('partner:busy', policy)).allowed) allowed++;
      }
      assert.equal(allowed, 19_000);
      // Each process doubles its batch from 1 to 1,000 (11 reservations), then takes 1,000 at a time:
      // at most 2 × 11 + 19 statements. One token more a time, at most 100, took 276.
      assert.equal(MAX_RESERVATION, 1_000);
      assert.ok(statements <= 41, `${statements} reservations for 19,000 requests`);
      // Then until both are refused: the tokens one process still holds are the other's loss, never extra.
      for (let refusedInARow = 0; refusedInARow < 4; ) {
        const decision = await (allowed % 2 === 0 ? first : second).take('partner:busy', policy);
        const other = await (allowed % 2 === 0 ? second : first).take('partner:busy', policy);
        allowed += Number(decision.allowed) + Number(other.allowed);
        refusedInARow = decision.allowed || other.allowed ? 0 : refusedInARow + 1;
      }
      assert.equal(allowed, policy.burst);
    });

    test('a busy caller renews its lease before it runs out: its requests are answered from memory while the reservation travels', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      await migrateToLatest(handle.db, rateLimitMigrations);
      // The limiter's statements, counted when sent and when answered.
      let sent = 0;
      let answered = 0;
      const db = handle.db;
      const counted = new Proxy(db, {
        get(target, property) {
          if (property === 'executeQuery') {
            return (query: Parameters<typeof db.executeQuery>[0]) => {
              sent++;
              return target.executeQuery(query).finally(() => answered++);
            };
          }
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const clock = new ManualClock(Date.UTC(2026, 10, 1));
      const policy = { perMinute: 60, burst: 20_000 };
      const limiter = createRateLimiter(counted, false, clock);
      // Up to full leases of a thousand tokens, a request at a time as the server asks.
      for (let i = 0; i < 3_000; i++) assert.ok((await limiter.take('partner:busy', policy)).allowed);
      assert.ok(RENEW_FROM <= MAX_RESERVATION);
      // Then 5,000 more with no wait for I/O, as the whoami fast path asks (takeNow): a reservation
      // started on the way is let finish before the next request, as a server's event loop would.
      const before = sent;
      for (let i = 0; i < 5_000; i++) {
        const decision = limiter.takeNow('partner:busy', policy);
        assert.ok(decision?.allowed, `request ${i} found the lease spent`);
        while (answered < sent) await new Promise(setImmediate);
      }
      assert.ok(sent - before >= 4, `${sent - before} renewals for 5,000 requests`);
      // Nothing extra was allowed: the bucket holds 20,000, of which 8,000 were spent and the rest
      // reserved by this process or still in the bucket.
      let more = 8_000;
      while ((await limiter.take('partner:busy', policy)).allowed) more++;
      assert.equal(more, policy.burst);
    });

    test('the buckets are kept out of the write-ahead log (a commit that only reserved tokens waits for no disk)', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      await migrateToLatest(handle.db, rateLimitMigrations);
      const { rows } = await sql<{ relpersistence: string }>`select relpersistence from pg_class where relname = 'rate_limits'`.execute(
        handle.db,
      );
      assert.deepEqual(rows, [{ relpersistence: 'u' }]);
    });
  });
}
