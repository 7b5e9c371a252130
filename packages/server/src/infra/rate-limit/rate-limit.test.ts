import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { type Kysely, sql } from 'kysely';
import { assertError, createPartner, exchange, issueKey, partnerApi, partnerWithToken } from '../../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';
import { ManualClock } from '../clock.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { describe as describeBucket, type RateDecision, step } from './gcra.ts';
import { rateLimitMigrations } from './migrations.ts';
import { createRateLimiter, MAX_RESERVATION } from './rate-limiter.ts';
import type { RateLimitTables } from './tables.ts';

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

    // On PostgreSQL the key's bucket is charged in the statement that reads the key,
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
    test('a busy caller reserves ever larger batches while the bucket is over half full, then only what its requests wait for; together the processes allow exactly what the bucket holds', async (t) => {
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
      for (let i = 0; i < 8_000; i++) {
        if ((await (i % 2 === 0 ? first : second).take('partner:busy', policy)).allowed) allowed++;
      }
      assert.equal(allowed, 8_000);
      // Each process doubles its batch from 1 to 1,000 (11 reservations), then takes 1,000 at a time:
      // at most 2 × 11 + 8 statements. One token more a time, at most 100, took 276.
      assert.equal(MAX_RESERVATION, 1_000);
      assert.ok(statements <= 30, `${statements} reservations for 8,000 requests`);
      // Below half the burst a process reserves only for the requests waiting on it: 64 at a time, half
      // on each process, cost a few statements between them, and the first refusal comes when the bucket
      // is spent, never while the other process holds tokens it may not spend.
      statements = 0;
      let rounds = 0;
      for (let refused = 0; refused === 0; rounds++) {
        const decisions = await Promise.all(
          Array.from({ length: 64 }, (_, i) => (i % 2 === 0 ? first : second).take('partner:busy', policy)),
        );
        refused = decisions.filter((decision) => !decision.allowed).length;
        allowed += decisions.length - refused;
      }
      assert.equal(allowed, policy.burst);
      assert.ok(statements <= rounds * 6, `${statements} reservations for ${rounds} rounds of 64 requests`);
    });

    test('a busy caller renews its lease when a quarter is left, and is answered from memory while the renewal travels', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      await migrateToLatest(handle.db, rateLimitMigrations);
      const statements = countingStatements(handle.db);
      // The clock stands still: nothing refills, so the bucket holds exactly its burst.
      const clock = new ManualClock(Date.UTC(2026, 10, 1));
      const policy = { perMinute: 60, burst: 20_000 };
      const limiter = createRateLimiter(statements.db, false, clock);
      let allowed = 0;
      /** The request that found the lease spent, still waiting for its decision. */
      let waiting: Promise<RateDecision> | undefined;
      /** One request, as the server asks: true when decided from memory (no promise), false when it waits. */
      const now = (): boolean => {
        const decision = limiter.take('partner:busy', policy);
        if (decision instanceof Promise) {
          waiting = decision;
          return false;
        }
        if (decision.allowed) allowed++;
        return true;
      };
      /** The waiting request's decision, once it has one. */
      const waited = async (): Promise<boolean> => {
        const decision = await waiting;
        waiting = undefined;
        if (decision?.allowed) allowed++;
        return decision?.allowed === true;
      };
      const take = async (): Promise<boolean> => {
        const { allowed: yes } = await limiter.take('partner:busy', policy);
        if (yes) allowed++;
        return yes;
      };
      // Up to full leases of a thousand tokens, a request at a time as the server asks; then the
      // renewal under way is let land.
      for (let i = 0; i < 3_000; i++) assert.ok(await take());
      await statements.settled();
      // From memory until the renewal is sent.
      const before = statements.sent;
      for (let i = 0; statements.sent === before; i++) {
        assert.ok(now(), `request ${i} found the lease spent`);
        assert.ok(i < 2 * MAX_RESERVATION, 'no renewal was sent');
      }
      // The quarter left answers while it travels; then the lease is spent, and take() waits for the
      // renewal instead of reserving again.
      for (let i = 0; i < MAX_RESERVATION / 4; i++) assert.ok(now(), `request ${i} while the renewal travels`);
      assert.equal(now(), false, 'the lease is spent before the renewal lands');
      assert.ok(await waited(), 'the request waits for the renewal instead of reserving again');
      assert.equal(statements.sent - before, 1, 'one statement: the renewal');
      // A renewal that fails is dropped; the take() that finds the lease spent reserves for itself.
      statements.failNext = true;
      while (statements.sent === before + 1) assert.ok(now());
      await statements.settled();
      while (now());
      assert.ok(await waited(), 'the request that finds the lease spent reserves after a failed renewal');
      assert.equal(statements.sent - before, 3);
      // Nothing extra was allowed: spent to the last token, the bucket gave exactly its burst.
      while (await take());
      assert.equal(allowed, policy.burst);
    });

    test('a lease left unspent long enough for the bucket to refill hands nothing back', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      await migrateToLatest(handle.db, rateLimitMigrations);
      const clock = new ManualClock(Date.UTC(2026, 10, 1));
      const policy = { perMinute: 60, burst: 4_000 };
      const idle = createRateLimiter(handle.db, false, clock);
      const busy = createRateLimiter(handle.db, false, clock);
      // The first process takes leases up to a thousand tokens, then its caller goes quiet with most
      // of the last one unspent.
      for (let i = 0; i < 1_100; i++) assert.ok((await idle.take('partner:shared', policy)).allowed);
      // An hour later the bucket is full again, and the other process spends all of it.
      clock.advance(3_600_000);
      let allowed = 0;
      while ((await busy.take('partner:shared', policy)).allowed) allowed++;
      assert.equal(allowed, policy.burst);
      // The first process's next reservation hands back its old lease: nothing, the bucket refilled
      // long since; it is refused like the other.
      const decision = await idle.take('partner:shared', policy);
      assert.equal(decision.allowed, false, 'an hour-old lease was credited to the bucket again');
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

/**
 * A database handle whose raw statements (the limiter's reservations) are counted when sent and when
 * answered; `failNext` makes the next one fail, as a lost connection would.
 */
function countingStatements(db: Kysely<RateLimitTables>) {
  const counts = {
    sent: 0,
    answered: 0,
    failNext: false,
    /** Resolves when every statement sent has been answered (waits on the event loop, not a timer). */
    async settled(): Promise<void> {
      while (counts.answered < counts.sent) await new Promise(setImmediate);
    },
  };
  const counted = new Proxy(db, {
    get(target, property) {
      if (property === 'executeQuery') {
        return (query: Parameters<typeof db.executeQuery>[0]) => {
          counts.sent++;
          const failing = counts.failNext;
          counts.failNext = false;
          const result = failing ? Promise.reject(new Error('connection lost')) : target.executeQuery(query);
          return result.finally(() => counts.answered++);
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return Object.assign(counts, { db: counted });
}
