import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { runCli } from '../../test/cli-runner.ts';
import { assertError, operatorApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { startServer } from '../app/server.ts';
import { loadConfig } from '../config/config.ts';
import { platformDrivers } from '../platform/drivers.ts';

/**
 * A customer's platform name is `<partner's prefix>-<customer id>`: two partners' prefixes overlap when
 * one followed by a dash begins the other followed by a dash (`a` and `a-b`: `a` + `b-c` = `a-b` + `c`).
 * `acmex` and `acmexx` never do: the dash after `acmex` meets the `x` of `acmexx`.
 */
/** The key both servers of the start-up test share, as processes on one database do. */
const SECRET_KEY = 'b2'.repeat(32);

for (const target of testDatabases()) {
  describe(`customer prefixes [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target, { env: { TENANTRY_SECRET_KEY: SECRET_KEY } });
    });
    after(() => server.stop());

    type PartnerBody = { data: { id: string; customer_prefix: string } };
    const create = (id: string, extra: Record<string, unknown> = {}) =>
      operatorApi<PartnerBody>(server, 'POST', '/partners', { body: { id, display_name: id, ...extra } });
    const update = (id: string, body: Record<string, unknown>) => operatorApi<PartnerBody>(server, 'PATCH', `/partners/${id}`, { body });
    const overlap = (a: string, b: string) => `${a}-`.startsWith(`${b}-`) || `${b}-`.startsWith(`${a}-`);

    test('a prefix that could name another partner’s customers answers 409 CONFLICT naming that partner', async () => {
      assert.equal((await create('pfx-short', { customer_prefix: 'a' })).status, 201);
      for (const [id, prefix] of [
        ['pfx-longer', 'a-b'],
        ['pfx-same', 'a'],
      ] as const) {
        const refused = assertError(await create(id, { customer_prefix: prefix }), 409, 'CONFLICT');
        assert.match(refused.message, /partner pfx-short/);
        assert.deepEqual(refused.details, {
          field: 'customer_prefix',
          value: prefix,
          partner_id: 'pfx-short',
          partner_customer_prefix: 'a',
        });
        assertError(await operatorApi(server, 'GET', `/partners/${id}`), 404, 'NOT_FOUND');
      }
      // The longer one first: the shorter is refused the same way.
      assert.equal((await create('pfx-long', { customer_prefix: 'x-y' })).status, 201);
      const shorter = assertError(await create('pfx-x', { customer_prefix: 'x' }), 409, 'CONFLICT');
      assert.equal(shorter.details?.partner_id, 'pfx-long');
      // No dash between them: `acmex-…` and `acmexx-…` differ at the sixth character.
      assert.equal((await create('pfx-acmex', { customer_prefix: 'acmex' })).status, 201);
      assert.equal((await create('pfx-acmexx', { customer_prefix: 'acmexx' })).status, 201);
      assert.equal((await create('pfx-ab', { customer_prefix: 'ab' })).status, 201, '`a-` does not begin `ab-`');
    });

    test('an update to an overlapping prefix answers 409 CONFLICT; keeping or freeing a prefix is allowed', async () => {
      assert.equal((await create('upd-one', { customer_prefix: 'one' })).status, 201);
      assert.equal((await create('upd-two', { customer_prefix: 'two' })).status, 201);
      const refused = assertError(await update('upd-two', { customer_prefix: 'one-more' }), 409, 'CONFLICT');
      assert.match(refused.message, /partner upd-one/);
      assert.equal(refused.details?.partner_id, 'upd-one');
      assert.equal((await operatorApi<PartnerBody>(server, 'GET', '/partners/upd-two')).body.data.customer_prefix, 'two');
      assert.equal((await update('upd-two', { customer_prefix: 'two' })).status, 200, 'its own prefix again');
      assert.equal((await update('upd-one', { customer_prefix: 'uno' })).status, 200);
      assert.equal((await update('upd-two', { customer_prefix: 'one-more' })).status, 200, 'free once the other moved away');
    });

    test('two operator calls at once cannot both take overlapping prefixes', async () => {
      const pairs = Array.from({ length: 8 }, (_, i) => i);
      const creates = await Promise.all(
        pairs.flatMap((i) => [create(`race-${i}`, { customer_prefix: `r${i}` }), create(`race-${i}-x`, { customer_prefix: `r${i}-x` })]),
      );
      for (const i of pairs) {
        const statuses = [creates[2 * i]?.status, creates[2 * i + 1]?.status].sort();
        assert.deepEqual(statuses, [201, 409], `pair ${i}: ${creates[2 * i]?.text} / ${creates[2 * i + 1]?.text}`);
      }
      for (const i of pairs) {
        assert.equal((await create(`move-${i}`, { customer_prefix: `m${i}` })).status, 201);
        assert.equal((await create(`move-${i}-x`, { customer_prefix: `n${i}` })).status, 201);
      }
      const updates = await Promise.all(
        pairs.flatMap((i) => [update(`move-${i}`, { customer_prefix: `t${i}` }), update(`move-${i}-x`, { customer_prefix: `t${i}-x` })]),
      );
      for (const i of pairs) {
        const statuses = [updates[2 * i]?.status, updates[2 * i + 1]?.status].sort();
        assert.deepEqual(statuses, [200, 409], `pair ${i}: ${updates[2 * i]?.text} / ${updates[2 * i + 1]?.text}`);
      }
    });

    test('default prefixes never overlap (acme and acme-eu, either order) and are cut to Kube-DC’s 16 characters', async () => {
      const taken = async (...ids: string[]) => {
        const prefixes: string[] = [];
        for (const id of ids) {
          const created = await create(id);
          assert.equal(created.status, 201, created.text);
          prefixes.push(created.body.data.customer_prefix);
        }
        return prefixes;
      };
      const [acme = '', acmeEu = ''] = await taken('acme', 'acme-eu');
      assert.equal(acme, 'acme');
      assert.ok(!overlap(acme, acmeEu), `${acme} and ${acmeEu}`);
      const [globexEu = '', globex = ''] = await taken('globex-eu', 'globex');
      assert.equal(globexEu, 'globex-eu');
      assert.ok(!overlap(globex, globexEu), `${globex} and ${globexEu}`);
      const [long = ''] = await taken('very-long-partner-identifier-xyz');
      assert.equal(long, 'very-long-partne');
      const tooLong = assertError(await create('pfx-too-long', { customer_prefix: 'abcdefghijklmnopq' }), 400, 'VALIDATION_ERROR');
      assert.match(JSON.stringify(tooLong.details), /customer_prefix/);
    });

    test('the CLI’s --customer-prefix is refused with the partner it would overlap', async () => {
      assert.equal((await create('cli-owner', { customer_prefix: 'cli' })).status, 201);
      const env = { TENANTRY_OPERATOR_URL: server.operatorUrl, TENANTRY_OPERATOR_TOKEN: server.operatorToken };
      const created = await runCli(['partners', 'create', 'cli-other', '--name', 'Other', '--customer-prefix', 'cli-x', '--no-wait'], env);
      assert.equal(created.code, 1, created.stderr);
      assert.match(created.stderr, /^tenantry: CONFLICT: .*partner cli-owner/);
      const updated = await runCli(['partners', 'update', 'cli-owner', '--customer-prefix', 'cli-owner'], env);
      assert.equal(updated.code, 0, updated.stderr);
    });

    test('partners that already overlap are named in a warning at start-up, and can still be changed', async () => {
      assert.equal((await create('old', { customer_prefix: 'old' })).status, 201);
      assert.equal((await create('old-eu', { customer_prefix: 'oldeu' })).status, 201);
      // As an earlier version could leave them (the prefix was the id, unchecked).
      await server.database.db.updateTable('partners').set({ customer_prefix: 'old-eu' }).where('id', '=', 'old-eu').execute();
      const lines: Record<string, unknown>[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
          done();
        },
      });
      const again = await startServer(
        loadConfig(platformDrivers, {
          TENANTRY_LISTEN: '127.0.0.1:0',
          TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
          TENANTRY_OPERATOR_TOKEN: server.operatorToken,
          TENANTRY_SECRET_KEY: SECRET_KEY,
          TENANTRY_DATA_DIR: '/nonexistent-test-data-dir',
          ...(server.databaseUrl ? { TENANTRY_DATABASE_URL: server.databaseUrl } : {}),
        }),
        { database: server.database, logger: pino({ level: 'info' }, sink) },
      );
      await again.close();
      const warning = lines.find((line) => line.level === 40 && String(line.msg).includes('customer prefixes overlap'));
      assert.ok(warning, JSON.stringify(lines));
      assert.deepEqual(warning.overlapping, [{ partners: ['old', 'old-eu'], customer_prefixes: ['old', 'old-eu'] }]);
      assert.equal((await update('old-eu', { display_name: 'Old EU' })).status, 200, 'other settings still change');
      assert.equal((await update('old-eu', { customer_prefix: 'oldeu' })).status, 200, 'and the prefix, to one that is free');
    });
  });
}
