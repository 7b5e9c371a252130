import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { assertError, exchange, fieldErrors, issueKey, partnerApi, partnerWithToken } from '../../../test/client.ts';
import { type FixtureControl, fixtureRoutes } from '../../../test/fixtures.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';

for (const target of testDatabases()) {
  describe(`Idempotency-Key [${target.name}]`, () => {
    let server: TestServer;
    let control: FixtureControl;
    let token: string;
    let apiKey: string;
    const effects = async (name: string) =>
      Number(
        (await sql<{ n: number }>`select count(*)::int as n from fixture_effects where name = ${name}`.execute(server.database.db)).rows[0]
          ?.n,
      );
    const create = (name: string, key?: string, as = token, extra: Record<string, unknown> = {}) =>
      partnerApi(server, 'POST', '/test-fixtures/effects', {
        token: as,
        body: { name, ...extra },
        ...(key ? { headers: { 'idempotency-key': key } } : {}),
      });

    before(async () => {
      const fixtures = fixtureRoutes();
      control = fixtures.control;
      server = await startTestServer(target, { partnerRoutes: [fixtures.routes] });
      ({ token, key: apiKey } = await partnerWithToken(server, 'idem', {
        settings: { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 1_000 } },
      }));
    });
    after(() => server.stop());

    test('a repeat with the same key and body replays the first response: same status and body, no second effect', async () => {
      const first = await create('replayed', 'key-1');
      assert.equal(first.status, 201);
      const second = await create('replayed', 'key-1');
      assert.equal(second.status, 201);
      assert.equal(second.text, first.text);
      assert.equal(second.headers.get('idempotent-replayed'), 'true');
      assert.equal(second.headers.get('x-request-id'), first.headers.get('x-request-id'));
      assert.equal(await effects('replayed'), 1);
      // Key order in the body does not make a different request.
      const reordered = await partnerApi(server, 'POST', '/test-fixtures/effects', {
        token,
        rawBody: '{"note":"n","name":"ordered"}',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'key-order' },
      });
      const again = await create('ordered', 'key-order', token, { note: 'n' });
      assert.equal(again.text, reordered.text);
    });

    test('the same key with a different body answers 409 IDEMPOTENCY_KEY_REUSED and has no effect', async () => {
      assert.equal((await create('first-body', 'key-2')).status, 201);
      const error = assertError(await create('second-body', 'key-2'), 409, 'IDEMPOTENCY_KEY_REUSED');
      assert.equal(error.details?.idempotency_key, 'key-2');
      assert.equal(await effects('second-body'), 0);
    });

    test('a repeat while the first runs answers 409 IDEMPOTENCY_KEY_IN_PROGRESS with Retry-After', async () => {
      const first = partnerApi(server, 'POST', '/test-fixtures/slow', { token, headers: { 'idempotency-key': 'key-slow' } });
      await control.slowStarted;
      const second = await partnerApi(server, 'POST', '/test-fixtures/slow', { token, headers: { 'idempotency-key': 'key-slow' } });
      assertError(second, 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
      assert.equal(second.headers.get('retry-after'), '1');
      control.releaseSlow();
      assert.equal((await first).status, 200);
      const replay = await partnerApi(server, 'POST', '/test-fixtures/slow', { token, headers: { 'idempotency-key': 'key-slow' } });
      assert.equal(replay.status, 200);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    });

    test('a first request that never finished (its process died) stops blocking its key after 60 s', async () => {
      const first = partnerApi(server, 'POST', '/test-fixtures/slow', { token, headers: { 'idempotency-key': 'key-dead' } });
      await control.slowStarted;
      assertError(
        await partnerApi(server, 'POST', '/test-fixtures/slow', { token, headers: { 'idempotency-key': 'key-dead' } }),
        409,
        'IDEMPOTENCY_KEY_IN_PROGRESS',
      );
      server.clock.advance(61_000);
      token = (await exchange(server, apiKey)).body.access_token;
      const retryStarted = control.nextSlowStart();
      const retry = partnerApi(server, 'POST', '/test-fixtures/slow', { token, headers: { 'idempotency-key': 'key-dead' } });
      // The retry took the key over and runs; a different body with the key is still refused.
      await Promise.race([
        retryStarted,
        retry.then((answer) => assert.fail(`the retry answered ${answer.status} without running: ${answer.text}`)),
      ]);
      assertError(
        await partnerApi(server, 'POST', '/test-fixtures/slow', {
          token,
          body: { other: true },
          headers: { 'idempotency-key': 'key-dead' },
        }),
        409,
        'IDEMPOTENCY_KEY_REUSED',
      );
      control.releaseSlow();
      assert.equal((await retry).status, 200);
      assert.equal((await first).status, 200);
    });

    test('a request cut after its effect committed is answered by its retry with that effect, not run again', async () => {
      const committed = control.nextHangAfterCommit();
      const cut = partnerApi(server, 'POST', '/test-fixtures/effects-then-hang', {
        token,
        body: { name: 'cut' },
        headers: { 'idempotency-key': 'key-cut' },
      });
      await committed;
      // Well past the key's lease: the retry finds the answer committed with the effect.
      server.clock.advance(61_000);
      token = (await exchange(server, apiKey)).body.access_token;
      const retry = await partnerApi(server, 'POST', '/test-fixtures/effects-then-hang', {
        token,
        body: { name: 'cut' },
        headers: { 'idempotency-key': 'key-cut' },
      });
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
      assert.equal(await effects('cut'), 1);
      const { id } = (retry.body as { data: { id: number } }).data;
      const row = await sql<{ id: number }>`select id from fixture_effects where name = 'cut'`.execute(server.database.db);
      assert.equal(id, row.rows[0]?.id, 'the answer names the effect that was committed');
      control.releaseHung();
      assert.equal((await cut).status, 500);
      const again = await partnerApi(server, 'POST', '/test-fixtures/effects-then-hang', {
        token,
        body: { name: 'cut' },
        headers: { 'idempotency-key': 'key-cut' },
      });
      assert.equal(again.text, retry.text, 'what happened after the commit does not change the answer');
    });

    test('a success committed with its effect is the answer sent, byte for byte', async () => {
      const first = await create('sealed', 'key-sealed');
      const stored = await sql<{ body: string; state: string }>`select body, state from idempotency_keys where key = 'key-sealed'`.execute(
        server.database.db,
      );
      assert.equal(stored.rows[0]?.state, 'done');
      assert.equal(stored.rows[0]?.body, first.text);
    });

    test('fifty concurrent identical requests have exactly one effect', async () => {
      const results = await Promise.all(Array.from({ length: 50 }, () => create('concurrent', 'key-50')));
      assert.equal(await effects('concurrent'), 1);
      const statuses = results.map((r) => r.status);
      assert.ok(
        statuses.every((s) => s === 201 || s === 409),
        statuses.join(','),
      );
      for (const result of results.filter((r) => r.status === 409)) assertError(result, 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
      const bodies = new Set(results.filter((r) => r.status === 201).map((r) => r.text));
      assert.equal(bodies.size, 1, 'every success is the same response');
    });

    test('keys are scoped to partner and mode', async () => {
      const other = await partnerWithToken(server, 'idem-other');
      const testToken = (await exchange(server, await issueKey(server, 'idem', { mode: 'test' }))).body.access_token;
      assert.equal((await create('scoped', 'key-shared')).status, 201);
      assert.equal((await create('scoped', 'key-shared', other.token)).headers.get('idempotent-replayed'), null);
      assert.equal((await create('scoped', 'key-shared', testToken)).headers.get('idempotent-replayed'), null);
      assert.equal(await effects('scoped'), 3);
    });

    test('a key is kept 24 hours; after that it starts a new request', async () => {
      assert.equal((await create('expiring', 'key-24h')).status, 201);
      server.clock.advance(24 * 3600 * 1000 - 1000);
      token = (await exchange(server, apiKey)).body.access_token;
      assert.equal((await create('expiring', 'key-24h')).headers.get('idempotent-replayed'), 'true');
      server.clock.advance(2000);
      const after24h = await create('expiring', 'key-24h');
      assert.equal(after24h.status, 201);
      assert.equal(after24h.headers.get('idempotent-replayed'), null);
      assert.equal(await effects('expiring'), 2);
    });

    test('a retryable refusal (409 BUSY) is not stored: the retry with the same key runs again', async () => {
      const first = await partnerApi(server, 'POST', '/test-fixtures/busy-once', { token, headers: { 'idempotency-key': 'key-busy' } });
      assertError(first, 409, 'BUSY');
      assert.equal(first.headers.get('retry-after'), '3');
      const retry = await partnerApi<{ data: { calls: number } }>(server, 'POST', '/test-fixtures/busy-once', {
        token,
        headers: { 'idempotency-key': 'key-busy' },
      });
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.body.data.calls, 2);
    });

    test('a 500 is not stored: a retry with the same key runs again', async () => {
      const first = await partnerApi(server, 'POST', '/test-fixtures/fail', { token, headers: { 'idempotency-key': 'key-500' } });
      assertError(first, 500, 'INTERNAL_ERROR');
      const second = await partnerApi(server, 'POST', '/test-fixtures/fail', { token, headers: { 'idempotency-key': 'key-500' } });
      assertError(second, 500, 'INTERNAL_ERROR');
      assert.notEqual(second.headers.get('idempotent-replayed'), 'true');
    });

    test('a malformed key answers 400 VALIDATION_ERROR; a validation failure does not consume the key', async () => {
      const bad = await partnerApi(server, 'POST', '/test-fixtures/effects', {
        token,
        body: { name: 'x' },
        headers: { 'idempotency-key': 'x'.repeat(256) },
      });
      assert.equal(fieldErrors(assertError(bad, 400, 'VALIDATION_ERROR'))[0]?.field, 'idempotency-key');
      assertError(await create('', 'key-valid-later'), 400, 'VALIDATION_ERROR');
      assert.equal((await create('valid-later', 'key-valid-later')).status, 201);
    });
  });
}
