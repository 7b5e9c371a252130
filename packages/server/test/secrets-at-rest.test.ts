import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import type { AppDatabase as DatabaseHandle } from '../src/app/database.ts';
import { type RunningServer, startServer } from '../src/app/server.ts';
import { AccessTokenCodec } from '../src/auth/access-tokens.ts';
import { ConfigError, loadConfig } from '../src/config/config.ts';
import { ManualClock } from '../src/infra/clock.ts';
import { SecretBox, sealedKeyId, secretKeyId } from '../src/infra/secrets/secret-box.ts';
import { loadServerSecrets } from '../src/infra/secrets/server-secrets.ts';
import { platformDrivers } from '../src/platform/drivers.ts';
import { createPartner, exchange, issueKey, operatorApi, partnerApi } from './client.ts';
import { testDatabases } from './harness.ts';
import { TEST_CA_FILE, WebhookReceiver } from './webhook-receiver.ts';

/**
 * Issue 13, section 1: a copy of the database alone gives no usable secret. The token signing key,
 * the cursor key and webhook signing secrets are sealed with a key kept outside the database; a
 * token forged from what the database holds is refused; the key can be rotated.
 */
const KEY_A = randomBytes(32).toString('hex');
const KEY_B = randomBytes(32).toString('hex');
const OPERATOR_TOKEN = randomBytes(24).toString('hex');
const ALL_SCOPES = ['customers:read', 'customers:write', 'customers:sso', 'usage:read'];

for (const target of testDatabases()) {
  describe(`secrets at rest [${target.name}]`, () => {
    let handle: DatabaseHandle;
    let drop: () => Promise<void>;
    let server: RunningServer | undefined;
    const clock = new ManualClock(Date.now());
    const receiver = new WebhookReceiver();

    const serve = async (secretKey: string) => {
      await server?.close();
      server = undefined;
      const config = loadConfig(platformDrivers, {
        TENANTRY_LISTEN: '127.0.0.1:0',
        TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
        TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN,
        TENANTRY_SECRET_KEY: secretKey,
        TENANTRY_SANDBOX_DELAY_MS: '0',
        TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE,
        TENANTRY_DATA_DIR: '/nonexistent-test-data-dir',
      });
      server = await startServer(config, { database: handle, clock, logger: pino({ level: 'silent' }) });
      return server;
    };
    const running = () => server as RunningServer;

    /** Every row of every table, as text: what a copy of the database gives away. */
    const databaseDump = async () => {
      const tables = await sql<{ table_name: string }>`
        select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`.execute(handle.db);
      let dump = '';
      for (const { table_name } of tables.rows) {
        const rows = await sql<{ row: string }>`select t::text as row from ${sql.table(table_name)} t`.execute(handle.db);
        dump += `${rows.rows.map((r) => r.row).join('\n')}\n`;
      }
      return dump;
    };

    let secret: string;
    let liveKey: string;

    before(async () => {
      ({ handle, drop } = await target.create());
      await receiver.listen();
      await serve(KEY_A);
      await createPartner(running(), 'vault', { allow_private_webhooks: true });
      await createPartner(running(), 'victim');
      liveKey = await issueKey(running(), 'vault');
      clock.advance(10_000);
      const token = (await exchange(running(), liveKey)).body.access_token;
      const put = await partnerApi<{ data: { signing_secret: string } }>(running(), 'PUT', '/webhook', {
        token,
        body: { url: receiver.url() },
        headers: { 'idempotency-key': 'create-hook' },
      });
      assert.equal(put.status, 200, put.text);
      secret = put.body.data.signing_secret;
    });
    after(async () => {
      await server?.close();
      await receiver.close();
      await drop();
    });

    test('the database holds no usable secret: signing keys and webhook secrets are sealed, replays keep only a hash', async () => {
      const box = new SecretBox([Buffer.from(KEY_A, 'hex')]);
      const keys = await loadServerSecrets(handle.db, box);
      const dump = await databaseDump();
      for (const [name, value] of [
        ['webhook signing secret', secret],
        ['token signing key (hex)', keys.tokenSigningKey.toString('hex')],
        ['token signing key (base64)', keys.tokenSigningKey.toString('base64')],
        ['cursor key (hex)', keys.cursorKey.toString('hex')],
        ['the secret key itself', KEY_A],
      ] as const) {
        assert.ok(!dump.includes(value), `the ${name} is not in the database`);
      }
      const stored = await handle.db.selectFrom('server_secrets').select(['name', 'value']).execute();
      for (const row of stored) assert.equal(sealedKeyId(row.value), secretKeyId(Buffer.from(KEY_A, 'hex')), `${row.name} is sealed`);
    });

    test('a token forged from a copy of the database is refused', async () => {
      const row = await handle.db
        .selectFrom('server_secrets')
        .select('value')
        .where('name', '=', 'token_signing_key')
        .executeTakeFirstOrThrow();
      const key = await handle.db.selectFrom('api_keys').select('kid').where('partner_id', '=', 'vault').executeTakeFirstOrThrow();
      const nowS = Math.floor(clock.nowMs() / 1000);
      // Every way an attacker could read the stored value as key material.
      const candidates = [Buffer.from(row.value), Buffer.from(row.value.split('.')[2] ?? '', 'base64url'), Buffer.from(row.value, 'hex')];
      for (const candidate of candidates) {
        for (const [p, exp] of [
          ['vault', nowS + 365 * 86400],
          ['vault', nowS + 600],
          ['victim', nowS + 600],
        ] as const) {
          const body = Buffer.from(JSON.stringify({ p, k: key.kid, m: 'live', s: ALL_SCOPES, iat: nowS, exp })).toString('base64url');
          const forged = `tnt_at_${body}.${createHmac('sha256', candidate).update(body).digest('base64url')}`;
          const whoami = await partnerApi(running(), 'GET', '/auth/whoami', { token: forged });
          assert.equal(whoami.status, 401, `a token signed with the stored value (${p}, exp +${exp - nowS}s) is refused`);
        }
      }
    });

    test('with the real signing key, only tokens the rules allow verify, in exactly one spelling', async () => {
      // The worst case: both the database and the secret key are stolen. The token's claims are still checked.
      const codec = new AccessTokenCodec((await loadServerSecrets(handle.db, new SecretBox([Buffer.from(KEY_A, 'hex')]))).tokenSigningKey);
      const vaultKid = (await handle.db.selectFrom('api_keys').select('kid').where('partner_id', '=', 'vault').executeTakeFirstOrThrow())
        .kid;
      const testKey = await issueKey(running(), 'vault', { mode: 'test' });
      const testKid = testKey.split('_')[3] as string;
      const nowS = Math.floor(clock.nowMs() / 1000);
      const claims = {
        partnerId: 'vault',
        kid: vaultKid,
        mode: 'live' as const,
        scopes: ALL_SCOPES as never,
        issuedAt: nowS,
        expiresAt: nowS + 900,
      };
      const status = async (token: string) => (await partnerApi(running(), 'GET', '/auth/whoami', { token })).status;

      const good = codec.issue(claims);
      assert.equal(await status(good), 200, 'a well-formed token of a real key verifies');
      assert.equal(await status(codec.issue({ ...claims, expiresAt: nowS + 901 })), 401, 'lifetime over 900 s');
      assert.equal(await status(codec.issue({ ...claims, expiresAt: nowS + 365 * 86400 })), 401, 'one-year lifetime');
      assert.equal(await status(codec.issue({ ...claims, kid: 'aaaaaaaaaaaa' })), 401, 'unknown key id');
      assert.equal(await status(codec.issue({ ...claims, partnerId: 'victim' })), 401, "another partner's name on this partner's key");
      assert.equal(await status(codec.issue({ ...claims, kid: testKid })), 401, 'a test key named by a live token');
      assert.equal(await status(codec.issue({ ...claims, issuedAt: nowS + 120, expiresAt: nowS + 900 })), 401, 'issued in the future');
      assert.equal(
        await status(codec.issue({ ...claims, issuedAt: nowS - 86400, expiresAt: nowS + 60 })),
        401,
        'lifetime over 900 s, backdated',
      );

      // One spelling only.
      const [head, signature] = good.split('.') as [string, string];
      const last = signature.at(-1) as string;
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
      const flipped = alphabet[alphabet.indexOf(last) ^ 1] as string; // a 32-byte MAC leaves 2 unused bits in its last character
      const variants = [
        `${good}=`,
        `${head}.${signature}=`,
        `${head}=.${signature}`,
        `${head}.${signature.slice(0, -1)}${flipped}`,
        `${head}.${signature}AA`,
        `${head}.${signature.replace(/-/g, '+').replace(/_/g, '/')}${/[-_]/.test(signature) ? '' : '+'}`,
        `${good}.x`,
        ` ${good}`.trim().toUpperCase(),
      ];
      for (const variant of variants) assert.equal(await status(variant), 401, `non-canonical spelling ${variant.slice(-12)}`);
      assert.equal(await status(good), 200);

      // Revocation: tokens issued before it keep working until they expire; one claiming a later issue does not.
      const revoked = await operatorApi(running(), 'POST', `/partners/vault/keys/${vaultKid}/revoke`);
      assert.equal(revoked.status, 200, revoked.text);
      assert.equal(await status(good), 200, 'issued before the revocation: valid until it expires');
      clock.advance(5_000);
      const later = Math.floor(clock.nowMs() / 1000);
      assert.equal(await status(codec.issue({ ...claims, issuedAt: later, expiresAt: later + 900 })), 401, 'issued after the revocation');
    });

    test('the secret key rotates: a restart with the new key first seals everything again; the old key alone no longer opens it', async () => {
      const key = await issueKey(running(), 'vault');
      const token = (await exchange(running(), key)).body.access_token;
      const ping = async () => {
        const before = receiver.deliveries.length;
        const result = await partnerApi<{ data: { delivered: boolean } }>(running(), 'POST', '/webhook/test', { token });
        assert.equal(result.body.data.delivered, true, result.text);
        const delivery = receiver.deliveries[before];
        assert.ok(delivery);
        const expected = createHmac('sha256', secret)
          .update(`${delivery.headers['x-service-timestamp']}.`)
          .update(delivery.raw)
          .digest('hex');
        assert.equal(delivery.headers['x-service-signature'], `sha256=${expected}`, 'signed with the secret the partner holds');
      };
      await ping();

      await serve(`${KEY_B},${KEY_A}`);
      const idB = secretKeyId(Buffer.from(KEY_B, 'hex'));
      for (const row of await handle.db.selectFrom('server_secrets').select('value').execute()) assert.equal(sealedKeyId(row.value), idB);
      for (const row of await handle.db.selectFrom('webhooks').select('secret').execute()) assert.equal(sealedKeyId(row.secret), idB);
      assert.equal((await partnerApi(running(), 'GET', '/auth/whoami', { token })).status, 200, 'tokens survive the rotation');
      await ping();

      await serve(KEY_B);
      await ping();

      await server?.close();
      server = undefined;
      await assert.rejects(serve(KEY_A), (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.variable, 'TENANTRY_SECRET_KEY');
        assert.match(error.message, new RegExp(`sealed with secret key ${idB}`));
        return true;
      });
      await serve(KEY_B);
    });

    test('an idempotent replay of PUT /webhook is not cached and never hands back a revoked secret', async () => {
      const key = await issueKey(running(), 'vault');
      const token = (await exchange(running(), key)).body.access_token;
      const replay = () =>
        partnerApi<{ data: { signing_secret?: string; signing_secret_configured: boolean } }>(running(), 'PUT', '/webhook', {
          token,
          body: { url: receiver.url() },
          headers: { 'idempotency-key': 'create-hook' },
        });
      const first = await replay();
      assert.equal(first.headers.get('idempotent-replayed'), 'true');
      assert.equal(first.headers.get('cache-control'), 'no-store');
      assert.equal(first.body.data.signing_secret, secret, 'the secret is still current: the replay carries it');
      const stored = await handle.db
        .selectFrom('idempotency_keys')
        .select('body')
        .where('key', '=', 'create-hook')
        .executeTakeFirstOrThrow();
      assert.ok(!stored.body?.includes(secret), 'the stored answer keeps only a hash of the secret');

      const rotated = await partnerApi<{ data: { signing_secret: string } }>(running(), 'POST', '/webhook/secret', { token });
      assert.equal(rotated.status, 200);
      const after = await replay();
      assert.equal(after.status, 200);
      assert.equal(after.headers.get('idempotent-replayed'), 'true');
      assert.equal(after.body.data.signing_secret, undefined, 'the revoked secret is not handed back');
      assert.equal(after.body.data.signing_secret_configured, true);
      assert.ok(!after.text.includes(secret) && !after.text.includes(rotated.body.data.signing_secret));
      secret = rotated.body.data.signing_secret;
    });

    test('an idempotent replay of POST /webhook/secret hands back the secret it made while current, then is refused', async () => {
      const key = await issueKey(running(), 'vault');
      const token = (await exchange(running(), key)).body.access_token;
      const rotate = (idempotencyKey: string) =>
        partnerApi<{ data: { signing_secret?: string } }>(running(), 'POST', '/webhook/secret', {
          token,
          headers: { 'idempotency-key': idempotencyKey },
        });
      const made = await rotate('rotate-once');
      assert.equal(made.status, 200);
      const madeSecret = made.body.data.signing_secret as string;
      const again = await rotate('rotate-once');
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(again.body.data.signing_secret, madeSecret, 'a replay does not rotate again: it carries the same secret');
      const stored = await handle.db
        .selectFrom('idempotency_keys')
        .select('body')
        .where('key', '=', 'rotate-once')
        .executeTakeFirstOrThrow();
      assert.ok(!stored.body?.includes(madeSecret), 'the stored answer keeps only a hash of the secret');

      const next = await rotate('rotate-twice');
      assert.notEqual(next.body.data.signing_secret, madeSecret);
      const stale = await rotate('rotate-once');
      assert.equal(stale.status, 409, 'the secret that rotation made is revoked: nothing true is left to replay');
      assert.equal((stale.body as unknown as { error: { code: string } }).error.code, 'CONFLICT');
      assert.ok(!stale.text.includes(madeSecret));
      secret = next.body.data.signing_secret as string;
    });
  });
}
