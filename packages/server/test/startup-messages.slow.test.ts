import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from './cli-runner.ts';
import { SERVER_DATABASE_URL } from './harness.ts';

/**
 * `tenantry serve` as a person meets it on a bad day: each setting that does not work on this machine
 * stops start-up with one line on stderr that names the setting and how to change it, and exit code 2,
 * like invalid configuration.
 */

async function occupy(): Promise<{ server: Server; address: string }> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return { server, address: `127.0.0.1:${port}` };
}

/** A port nothing listens on: one that was just free. */
async function closedPort(): Promise<number> {
  const { server, address } = await occupy();
  server.close();
  await once(server, 'close');
  return Number(address.split(':')[1]);
}

async function serveFails(env: Record<string, string>): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tenantry-startup-'));
  const result = await runCli(['serve'], {
    TENANTRY_LISTEN: '127.0.0.1:0',
    TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
    TENANTRY_DATA_DIR: dataDir,
    ...env,
  });
  rmSync(dataDir, { recursive: true, force: true });
  assert.equal(result.code, 2, `${JSON.stringify(env)}: exit ${result.code}\n${result.stderr}`);
  const lines = result.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line on stderr, not a stack trace:\n${result.stderr}`);
  return lines[0] ?? '';
}

test('a port out of range says so', async () => {
  const line = await serveFails({ TENANTRY_LISTEN: '127.0.0.1:70000' });
  assert.match(line, /^tenantry: invalid configuration: TENANTRY_LISTEN: port 70000 is out of range: use 1 to 65535/);
});

test('a partner port in use says so and how to pick another; so does the operator port', async () => {
  const busy = await occupy();
  try {
    const partner = await serveFails({ TENANTRY_LISTEN: busy.address, TENANTRY_SANDBOX_DELAY_MS: '0' });
    assert.match(partner, /^tenantry: cannot start: TENANTRY_LISTEN: 127\.0\.0\.1:\d+ is already in use/);
    assert.match(partner, /choose another with TENANTRY_LISTEN or --listen/);
    const operator = await serveFails({ TENANTRY_OPERATOR_LISTEN: busy.address, TENANTRY_SANDBOX_DELAY_MS: '0' });
    assert.match(operator, /^tenantry: cannot start: TENANTRY_OPERATOR_LISTEN: 127\.0\.0\.1:\d+ is already in use/);
    assert.match(operator, /choose another with TENANTRY_OPERATOR_LISTEN or --operator-listen/);
  } finally {
    busy.server.close();
  }
});

test('a port in use is refused before the database is made: no data directory is left behind', async () => {
  const busy = await occupy();
  const free = await closedPort();
  try {
    for (const [variable, flag, env, args] of [
      ['TENANTRY_LISTEN', '--listen', { TENANTRY_LISTEN: busy.address }, []],
      ['TENANTRY_OPERATOR_LISTEN', '--operator-listen', {}, ['--operator-listen', busy.address]],
      // One port for both, every address and loopback: the operator's cannot have it.
      [
        'TENANTRY_OPERATOR_LISTEN',
        '--operator-listen',
        { TENANTRY_LISTEN: `0.0.0.0:${free}`, TENANTRY_OPERATOR_LISTEN: `127.0.0.1:${free}` },
        [],
      ],
    ] as const) {
      const dataDir = join(mkdtempSync(join(tmpdir(), 'tenantry-startup-')), 'data');
      const result = await runCli(['serve', ...args], {
        TENANTRY_LISTEN: '127.0.0.1:0',
        TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
        TENANTRY_DATA_DIR: dataDir,
        ...env,
      });
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.match(result.stderr, new RegExp(`^tenantry: cannot start: ${variable}: 127\\.0\\.0\\.1:\\d+ is already in use`));
      assert.ok(result.stderr.includes(`choose another with ${variable} or ${flag}`), result.stderr);
      assert.equal(existsSync(dataDir), false, `${JSON.stringify({ env, args })}: no data directory (nor database) is made`);
      rmSync(join(dataDir, '..'), { recursive: true, force: true });
    }
  } finally {
    busy.server.close();
  }
});

test('an unreachable database names TENANTRY_DATABASE_URL, without its password', async () => {
  const port = await closedPort();
  const line = await serveFails({ TENANTRY_DATABASE_URL: `postgres://tenantry:s3cret-pw@127.0.0.1:${port}/tenantry` });
  assert.match(
    line,
    /^tenantry: cannot start: TENANTRY_DATABASE_URL: cannot connect to postgres:\/\/tenantry:\*\*\*@127\.0\.0\.1:\d+\/tenantry \(ECONNREFUSED\)/,
  );
  assert.doesNotMatch(line, /s3cret-pw/);
});

test('a database that does not exist on a reachable server names TENANTRY_DATABASE_URL', {
  skip: SERVER_DATABASE_URL ? false : 'TENANTRY_TEST_DATABASE_URL is not set',
}, async () => {
  const url = new URL(SERVER_DATABASE_URL ?? '');
  url.pathname = '/tenantry_no_such_database';
  const line = await serveFails({ TENANTRY_DATABASE_URL: url.toString() });
  assert.match(line, /^tenantry: cannot start: TENANTRY_DATABASE_URL: cannot use postgres:\/\/.*: the database does not exist$/);
});
