import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import {
  assertError,
  createPartner,
  exchange,
  fieldErrors,
  issueKey,
  operatorApi,
  partnerApi,
  partnerWithToken,
} from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { KeyUsage } from './key-usage.ts';
import type { ApiKeyRow } from './keys-store.ts';

for (const target of testDatabases()) {
  describe(`partner authentication [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    test('a live key exchanges for a Bearer token of at most 900 s carrying the partner scopes', async () => {
      await createPartner(server, 'auth-live');
      const key = await issueKey(server, 'auth-live');
      assert.match(key, /^tnt_live_auth-live_[a-z2-7]{12}_[a-z2-7]{52}$/);
      const result = await exchange(server, key);
      assert.equal(result.status, 200, result.text);
      assert.deepEqual(Object.keys(result.body).sort(), ['access_token', 'expires_in', 'scope', 'token_type']);
      assert.equal(result.body.token_type, 'Bearer');
      assert.equal(result.body.expires_in, 900);
      assert.equal(result.body.scope, 'customers:read customers:write customers:sso usage:read');
      assert.equal(result.headers.get('cache-control'), 'no-store');
      assert.equal(result.headers.get('x-ratelimit-limit'), '30', 'the token endpoint reports its per-key limit');
      assert.equal(result.headers.get('x-ratelimit-remaining'), '9');
      assert.ok(result.headers.get('x-request-id'));
      const keys = await operatorApi<{ data: { last_used_at: string | null }[] }>(server, 'GET', '/partners/auth-live/keys');
      assert.equal(keys.body.data[0]?.last_used_at, server.clock.now().toISOString(), 'the operator sees when a key was last used');
    });

    test("keys' last use is written in one statement however many keys were used, past PostgreSQL's 65,535 values", async () => {
      await createPartner(server, 'auth-many-keys');
      const db = server.database.db;
      const used = server.clock.now();
      // 40,000 keys used within one second: as value pairs, 80,000 values in one statement.
      await sql`insert into api_keys (kid, partner_id, mode, secret_hash, allow_cidrs, created_at)
        select 'many' || lpad(g::text, 8, '0'), 'auth-many-keys', 'live', md5(g::text), '{}', ${used.toISOString()}::timestamptz
        from generate_series(1, 40000) as g`.execute(db);
      const usage = new KeyUsage(db);
      for (let i = 1; i <= 40_000; i++) usage.record({ kid: `many${String(i).padStart(8, '0')}`, last_used_at: null } as ApiKeyRow, used);
      await usage.flush();
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from api_keys
        where partner_id = 'auth-many-keys' and last_used_at = ${used.toISOString()}::timestamptz`.execute(db);
      assert.deepEqual(rows, [{ n: 40_000 }]);
    });

    test('the form encoding (client_credentials) exchanges too', async () => {
      await createPartner(server, 'auth-form');
      const key = await issueKey(server, 'auth-form');
      const result = await partnerApi(server, 'POST', '/auth/token', {
        rawBody: new URLSearchParams({ grant_type: 'client_credentials', client_secret: key }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      assert.equal(result.status, 200, result.text);
      assert.equal(result.body.token_type, 'Bearer');

      const wrongGrant = await partnerApi(server, 'POST', '/auth/token', {
        rawBody: new URLSearchParams({ grant_type: 'password', client_secret: key }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      const error = assertError(wrongGrant, 400, 'VALIDATION_ERROR');
      assert.deepEqual(
        fieldErrors(error).map((e) => e.field),
        ['grant_type'],
      );
    });

    test('whoami reports partner, scopes, limits, customer count, defaults and token', async () => {
      const partner = await partnerWithToken(server, 'auth-whoami', {
        settings: {
          scopes: ['customers:read', 'usage:read'],
          limits: { max_customers: 7, rate_limit_per_minute: 300, rate_limit_burst: 50 },
          defaults: { plan_id: 'gpu-small', grace_days: 3, project: 'default' },
        },
      });
      const result = await partnerApi<{ status: string; data: Record<string, unknown> }>(server, 'GET', '/auth/whoami', {
        token: partner.token,
      });
      assert.equal(result.status, 200, result.text);
      assert.equal(result.body.status, 'success');
      const kid = partner.key.split('_')[3];
      assert.deepEqual(result.body.data, {
        partner: { id: 'auth-whoami', display_name: 'Partner auth-whoami' },
        scopes: ['customers:read', 'usage:read'],
        limits: {
          max_customers: 7,
          max_usage_window_days: 93,
          max_projects_per_customer: 10,
          max_open_operations: 20,
          rate_limit_per_minute: 300,
          rate_limit_burst: 50,
        },
        customer_count: 0,
        defaults: { plan_id: 'gpu-small', grace_days: 3, project: 'default' },
        token: { expires_at: new Date((Math.floor(server.clock.nowMs() / 1000) + 900) * 1000).toISOString(), kid, mode: 'live' },
      });
      assert.equal(result.headers.get('x-ratelimit-limit'), '300');
      assert.ok(Number(result.headers.get('x-ratelimit-remaining')) < 50);
    });

    test('a test key gives a test-mode token; a live key a live-mode token', async () => {
      await createPartner(server, 'auth-modes');
      const testKey = await issueKey(server, 'auth-modes', { mode: 'test' });
      assert.match(testKey, /^tnt_test_auth-modes_/);
      const token = (await exchange(server, testKey)).body.access_token;
      const whoami = await partnerApi<{ data: { token: { mode: string } } }>(server, 'GET', '/auth/whoami', { token });
      assert.equal(whoami.body.data.token.mode, 'test');
    });

    test('unknown, malformed, revoked, expired and address-restricted keys get one identical 401', async () => {
      await createPartner(server, 'auth-fail');
      const good = await issueKey(server, 'auth-fail');
      const revoked = await issueKey(server, 'auth-fail');
      const revokedKid = revoked.split('_')[3];
      assert.equal((await operatorApi(server, 'POST', `/partners/auth-fail/keys/${revokedKid}/revoke`)).status, 200);
      const expiring = await issueKey(server, 'auth-fail', { expires_at: new Date(server.clock.nowMs() + 60_000).toISOString() });
      const restricted = await issueKey(server, 'auth-fail', { allow_cidrs: ['203.0.113.0/24'] });
      const wrongSecret = `${good.slice(0, -4)}aaaa`;
      const otherPartner = good.replace('_auth-fail_', '_auth-xxxx_');
      server.clock.advance(61_000);

      const bodies: string[] = [];
      for (const key of [
        `tnt_live_nobody_aaaaaaaaaaaa_${'b'.repeat(52)}`,
        'not-a-key',
        wrongSecret,
        otherPartner,
        revoked,
        expiring,
        restricted,
      ]) {
        const result = await exchange(server, key);
        const error = assertError(result, 401, 'UNAUTHORIZED');
        assert.equal(error.details, undefined);
        bodies.push(JSON.stringify({ ...error, request_id: undefined }));
      }
      assert.equal(new Set(bodies).size, 1, `all failures look alike: ${[...new Set(bodies)].join(' | ')}`);
      // The good key still works: the failures were about the keys, not the partner.
      assert.equal((await exchange(server, good)).status, 200);
    });

    test('a key restricted to the caller address exchanges; IPv4 loopback matches 127.0.0.0/8', async () => {
      await createPartner(server, 'auth-cidr');
      const key = await issueKey(server, 'auth-cidr', { allow_cidrs: ['127.0.0.0/8', '2001:db8::/32'] });
      assert.equal((await exchange(server, key)).status, 200);
      const keys = await operatorApi<{ data: { allow_cidrs: string[] }[] }>(server, 'GET', '/partners/auth-cidr/keys');
      assert.deepEqual(keys.body.data[0]?.allow_cidrs, ['127.0.0.0/8', '2001:db8::/32']);
    });

    test('revocation stops exchanges at once; tokens already issued work until they expire', async () => {
      const partner = await partnerWithToken(server, 'auth-revoke');
      const kid = partner.key.split('_')[3];
      assert.equal((await operatorApi(server, 'POST', `/partners/auth-revoke/keys/${kid}/revoke`)).status, 200);
      assertError(await exchange(server, partner.key), 401, 'UNAUTHORIZED');
      assert.equal((await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token })).status, 200);
      server.clock.advance(900_000);
      assertError(await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token }), 401, 'UNAUTHORIZED');
    });

    test('a token expires after expires_in, and never outlives its key', async () => {
      await createPartner(server, 'auth-expiry');
      const key = await issueKey(server, 'auth-expiry', { expires_at: new Date(server.clock.nowMs() + 120_000).toISOString() });
      const result = await exchange(server, key);
      assert.ok(result.body.expires_in <= 120 && result.body.expires_in >= 119, `expires_in ${result.body.expires_in}`);
      const token = result.body.access_token;
      server.clock.advance(119_000);
      assert.equal((await partnerApi(server, 'GET', '/auth/whoami', { token })).status, 200);
      server.clock.advance(1_500);
      assertError(await partnerApi(server, 'GET', '/auth/whoami', { token }), 401, 'UNAUTHORIZED');
    });

    test('missing, malformed and forged tokens answer 401 UNAUTHORIZED', async () => {
      const partner = await partnerWithToken(server, 'auth-forged');
      assertError(await partnerApi(server, 'GET', '/auth/whoami'), 401, 'UNAUTHORIZED');
      assertError(await partnerApi(server, 'GET', '/auth/whoami', { headers: { authorization: 'Basic abc' } }), 401, 'UNAUTHORIZED');
      assertError(await partnerApi(server, 'GET', '/auth/whoami', { token: 'garbage' }), 401, 'UNAUTHORIZED');
      // The API key itself where its access token goes: the answer says to exchange it first.
      const keyAsToken = assertError(await partnerApi(server, 'GET', '/auth/whoami', { token: partner.key }), 401, 'UNAUTHORIZED');
      assert.match(keyAsToken.message, /^This is an API key, not an access token: exchange it first \(POST \/api\/public\/v1\/auth\/token/);
      // Verified once (and kept in memory by its signature): another body under that signature is still refused.
      assert.equal((await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token })).status, 200);
      const [body, signature] = partner.token.split('.');
      const tampered = `${body?.slice(0, -2)}xx.${signature}`;
      assertError(await partnerApi(server, 'GET', '/auth/whoami', { token: tampered }), 401, 'UNAUTHORIZED');
      assertError(await partnerApi(server, 'GET', '/auth/whoami', { token: `${body}.${'A'.repeat(43)}` }), 401, 'UNAUTHORIZED');
    });

    test('a suspended partner: exchange 403 PARTNER_SUSPENDED, earlier tokens 403 FORBIDDEN within seconds; unsuspended works again', async () => {
      const partner = await partnerWithToken(server, 'auth-suspend');
      assert.equal((await operatorApi(server, 'POST', '/partners/auth-suspend/suspend')).status, 200);
      assertError(await exchange(server, partner.key), 403, 'PARTNER_SUSPENDED');
      // This process invalidated its cache; other processes see it within the cache lifetime (2 s).
      assertError(await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token }), 403, 'FORBIDDEN');
      assert.equal((await operatorApi(server, 'POST', '/partners/auth-suspend/unsuspend')).status, 200);
      assert.equal((await exchange(server, partner.key)).status, 200);
      assert.equal((await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token })).status, 200);
    });

    test('a suspension made elsewhere (straight in the database) reaches this process within 5 s', async () => {
      const partner = await partnerWithToken(server, 'auth-suspend-db');
      assert.equal((await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token })).status, 200);
      await server.database.db.updateTable('partners').set({ status: 'suspended' }).where('id', '=', 'auth-suspend-db').execute();
      server.clock.advance(2_001);
      assertError(await partnerApi(server, 'GET', '/auth/whoami', { token: partner.token }), 403, 'FORBIDDEN');
    });
  });

  describe(`partner not ready [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      // Partner credentials take a third of the sandbox delay: 3 s here.
      server = await startTestServer(target, { env: { TENANTRY_SANDBOX_DELAY_MS: '9000' } });
    });
    after(() => server.stop());

    test('a new partner answers 503 PARTNER_NOT_READY with Retry-After until its credentials are ready', async () => {
      const partner = await createPartner(server, 'slow-partner');
      assert.equal(partner.status, 'provisioning');
      const key = await issueKey(server, 'slow-partner');
      const result = await exchange(server, key);
      assertError(result, 503, 'PARTNER_NOT_READY');
      assert.equal(result.headers.get('retry-after'), '3');
      server.clock.advance(3_000);
      assert.equal((await exchange(server, key)).status, 200);
      const shown = await operatorApi<{ data: { status: string } }>(server, 'GET', '/partners/slow-partner');
      assert.equal(shown.body.data.status, 'active');
    });
  });
}
