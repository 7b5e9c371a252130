import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCli } from './cli-runner.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';

/**
 * The CLI's refusals, as a person at a terminal meets them: each is one line on stderr that says what is
 * wrong in the command's own words (the flag, a value that works, the help to read), and a wrong command
 * line (a usage or a value) exits 2.
 */
const target = testDatabases()[0];
if (target) {
  describe('tenantry CLI: refusals a person can act on', () => {
    let server: TestServer;
    let env: Record<string, string>;
    const cli = (...args: string[]) => runCli(args, env);
    /** One line on stderr, nothing on stdout, and the exit code. */
    const refused = (result: { code: number; stdout: string; stderr: string }, code: number, line: RegExp) => {
      assert.equal(result.code, code, result.stderr);
      assert.equal(result.stdout, '');
      assert.equal(result.stderr.split('\n').length, 2, `one line: ${result.stderr}`);
      assert.match(result.stderr, line);
    };

    before(async () => {
      server = await startTestServer(target);
      env = { TENANTRY_OPERATOR_URL: server.operatorUrl, TENANTRY_OPERATOR_TOKEN: server.operatorToken };
      assert.equal((await cli('partners', 'create', 'usage-acme', '--name', 'Acme')).code, 0);
    });
    after(() => server.stop());

    test('a wrong operator token is said to be refused, naming where it came from', async () => {
      const fromEnv = await runCli(['partners', 'list'], {
        TENANTRY_OPERATOR_URL: server.operatorUrl,
        TENANTRY_OPERATOR_TOKEN: 'z'.repeat(32),
      });
      refused(
        fromEnv,
        1,
        /^tenantry: the operator token was refused by http:\/\/127\.0\.0\.1:\d+: the token in TENANTRY_OPERATOR_TOKEN is not that server's \(use the value of that server's TENANTRY_OPERATOR_TOKEN, or of operator-token in its data directory\)\n$/,
      );
      assert.doesNotMatch(fromEnv.stderr, /Send the operator token/);
      const dataDir = mkdtempSync(join(tmpdir(), 'tenantry-token-'));
      try {
        mkdirSync(dataDir, { recursive: true });
        writeFileSync(join(dataDir, 'operator-token'), 'stale-token-of-an-older-start\n');
        const fromFile = await runCli(['partners', 'list'], {
          TENANTRY_OPERATOR_LISTEN: new URL(server.operatorUrl).host,
          TENANTRY_DATA_DIR: dataDir,
        });
        refused(
          fromFile,
          1,
          new RegExp(
            `^tenantry: the operator token was refused by .*: the token in ${join(dataDir, 'operator-token')} is not that server's`,
          ),
        );
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    test('a value refused before it is sent names its flag and shows one that works', async () => {
      refused(
        await cli('keys', 'issue', 'usage-acme', '--expires-at', 'tomorrow'),
        2,
        /^tenantry: --expires-at must be an ISO 8601 date and time with its zone, for example --expires-at \d{4}-\d{2}-\d{2}T00:00:00Z; got "tomorrow"\n$/,
      );
      refused(
        await cli('keys', 'issue', 'usage-acme', '--expires-at', '2001-01-01T00:00:00Z'),
        2,
        /^tenantry: --expires-at must be in the future, for example --expires-at /,
      );
      refused(await cli('audit', '--limit', 'ten'), 2, /^tenantry: --limit must be a whole number, for example --limit 100; got "ten"\n$/);
      refused(
        await cli('capacity', 'set', 'usage-acme', '--per-customer-gpu', 'a100'),
        2,
        /^tenantry: --per-customer-gpu must be PROFILE=N, for example --per-customer-gpu a100-40gb=2; got "a100"\n$/,
      );
    });

    test('a value the server refuses is named by its flag too, with an example', async () => {
      refused(
        await cli('keys', 'issue', 'usage-acme', '--allow-cidr', 'nonsense'),
        2,
        /^tenantry: --allow-cidr "nonsense" is not an IPv4 or IPv6 address or CIDR, for example --allow-cidr 203\.0\.113\.0\/24\n$/,
      );
      refused(
        await cli('partners', 'update', 'usage-acme', '--contact-email', 'not-an-address'),
        2,
        /^tenantry: --contact-email .*, for example --contact-email ops@acme\.example\n$/,
      );
      refused(
        await cli('plans', 'set', 'tiny', '--name', '', '--vcpu', '1', '--memory-gib', '1', '--storage-gib', '1'),
        2,
        /^tenantry: --name /,
      );
      // What no flag gave stays in the API's words.
      refused(await cli('partners', 'show', 'no-such-partner'), 1, /^tenantry: NOT_FOUND: Partner no-such-partner does not exist\.\n$/);
    });

    test('a usage error is one line with the help to read, exit 2: unknown option, missing argument or option, unknown command', async () => {
      const serve = await cli('serve', '--no-such-flag');
      refused(serve, 2, /^tenantry: unknown option '--no-such-flag'; see tenantry serve --help\n$/);
      assert.doesNotMatch(serve.stderr, /TENANTRY_/, 'not the settings table');
      refused(
        await cli('partners', 'create', 'x'),
        2,
        /^tenantry: required option '--name <display name>' not specified; see tenantry partners create --help\n$/,
      );
      refused(await cli('keys', 'issue'), 2, /^tenantry: missing required argument 'partner'; see tenantry keys issue --help\n$/);
      refused(await cli('partners', 'lst'), 2, /^tenantry: unknown command 'lst' \(Did you mean list\?\); see tenantry partners --help\n$/);
      refused(await cli('nosuch'), 2, /^tenantry: unknown command 'nosuch'; see tenantry --help\n$/);
      refused(await cli('audit', '--limit'), 2, /^tenantry: option '--limit <n>' argument missing; see tenantry audit --help\n$/);
      refused(
        await cli('trigger', 'customer.ready', '--api-key', 'tnt_at_abc.def'),
        2,
        /^tenantry: --api-key takes the API key \(tnt_live_\.\.\. or tnt_test_\.\.\.\), not an access token/,
      );
      // Help asked for is still the whole help, and not an error.
      const help = await cli('serve', '--help');
      assert.equal(help.code, 0);
      assert.match(help.stdout, /TENANTRY_LISTEN/);
    });
  });
}
