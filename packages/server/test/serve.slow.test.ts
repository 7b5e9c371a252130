import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { MALLOC_ENV, NODE_FLAGS } from '../bin/process-settings.js';
import { runCli } from './cli-runner.ts';
import { assertError, exchange, http, issueKey, OPERATOR_API, partnerApi, partnerWithToken } from './client.ts';
import { createServerDatabase, dropServerDatabase, SERVER_DATABASE_URL, startTestServer, type TestDatabase } from './harness.ts';
import { spawnServe } from './serve-process.ts';

describe('tenantry serve', () => {
  test('invalid configuration stops start-up with one line naming the variable', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ TENANTRY_LISTEN: 'localhost' }, /^tenantry: invalid configuration: TENANTRY_LISTEN: must be host:port/],
      [{ TENANTRY_DATABASE_URL: 'mysql://x' }, /^tenantry: invalid configuration: TENANTRY_DATABASE_URL: must be a postgres:\/\//],
      [{ TENANTRY_SANDBOX_DELAY_MS: '-5' }, /^tenantry: invalid configuration: TENANTRY_SANDBOX_DELAY_MS: must be a whole number/],
      [{ TENANTRY_PLATFORM: 'vmware' }, /^tenantry: invalid configuration: TENANTRY_PLATFORM: must be "sandbox" or "kubernetes"/],
      [{ TENANTRY_TRUST_PROXY: 'true' }, /^tenantry: invalid configuration: TENANTRY_TRUST_PROXY: must be false, a number of proxy hops/],
      [{ TENANTRY_OPERATOR_TOKEN: 'short' }, /^tenantry: invalid configuration: TENANTRY_OPERATOR_TOKEN: must be at least 24 characters/],
      [
        { TENANTRY_WEBHOOK_CA_FILE: '/nonexistent/ca.pem' },
        /^tenantry: invalid configuration: TENANTRY_WEBHOOK_CA_FILE: cannot be read \(ENOENT\)/,
      ],
      [
        { TENANTRY_WEBHOOK_CA_FILE: fileURLToPath(new URL('../package.json', import.meta.url)) },
        /^tenantry: invalid configuration: TENANTRY_WEBHOOK_CA_FILE: holds no PEM certificate/,
      ],
      [
        { TENANTRY_OS_IMAGES_FILE: '/nonexistent/images.yaml' },
        /^tenantry: invalid configuration: TENANTRY_OS_IMAGES_FILE: cannot be read \(ENOENT\): \/nonexistent\/images.yaml/,
      ],
      [
        { TENANTRY_LISTEN: '127.0.0.1:9000', TENANTRY_OPERATOR_LISTEN: '127.0.0.1:9000' },
        /TENANTRY_OPERATOR_LISTEN: must differ from TENANTRY_LISTEN/,
      ],
    ];
    for (const [env, expected] of cases) {
      const result = await runCli(['serve'], env);
      assert.equal(result.code, 2, `${JSON.stringify(env)}: ${result.stderr}`);
      assert.match(result.stderr, expected);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
    }
  });

  test('TENANTRY_PLATFORM=kubernetes with settings missing: one line per problem, each naming its setting, exit 2', async () => {
    const result = await runCli(['serve'], {
      TENANTRY_PLATFORM: 'kubernetes',
      TENANTRY_KUBECONFIG: '/nonexistent/kubeconfig',
      TENANTRY_ADDRESS_POOL: '10.0.0.0/33',
    });
    assert.equal(result.code, 2, result.stderr);
    assert.deepEqual(
      result.stderr
        .trim()
        .split('\n')
        .map((line) => /^tenantry: invalid configuration: (TENANTRY_[A-Z_]+): /.exec(line)?.[1]),
      ['TENANTRY_KUBECONFIG', 'TENANTRY_IDP_URL', 'TENANTRY_IDP_CLIENT_SECRET_FILE', 'TENANTRY_ADDRESS_POOL'],
    );
  });

  test('npm start starts the server with the same Node flags and allocator settings as the chart and the tests', () => {
    const root = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } };
    const env = Object.entries(MALLOC_ENV).map(([name, value]) => `${name}=${value}`);
    assert.equal(root.scripts.start, [...env, 'node', ...NODE_FLAGS, 'packages/server/bin/tenantry.js', 'serve'].join(' '));
  });

  test('on the embedded defaults: generates the operator token (0600) into the data directory, serves, and stops cleanly on SIGTERM', async () => {
    // A data directory that does not exist yet, as on a new clone's first `npm start`.
    const scratch = mkdtempSync(join(tmpdir(), 'tenantry-serve-'));
    const dataDir = join(scratch, 'data');
    const builtinsFile = join(scratch, 'loaded-builtins.txt');
    const server = await spawnServe({
      TENANTRY_DATA_DIR: dataDir,
      TENANTRY_SANDBOX_DELAY_MS: '0',
      NODE_OPTIONS: `--import=${fileURLToPath(new URL('./fixtures/loaded-builtins.mjs', import.meta.url))}`,
      TENANTRY_TEST_BUILTINS_FILE: builtinsFile,
    });
    const tokenFile = join(dataDir, 'operator-token');
    assert.equal(statSync(tokenFile).mode & 0o777, 0o600);
    // The data directory, made on this first start (by the child, for the database's lock), is owner-only.
    assert.equal(statSync(dataDir).mode & 0o777, 0o700);
    const operatorToken = readFileSync(tokenFile, 'utf8').trim();
    // The CLI finds the server and its token from the data directory alone.
    const operatorListen = new URL(server.operatorUrl).host;
    const created = await runCli(['partners', 'create', 'serve-embedded', '--name', 'Embedded', '--json'], {
      TENANTRY_DATA_DIR: dataDir,
      TENANTRY_OPERATOR_LISTEN: operatorListen,
    });
    assert.equal(created.code, 0, created.stderr);
    const urls = { partnerUrl: server.partnerUrl, operatorUrl: server.operatorUrl, operatorToken };
    const key = await issueKey(urls, 'serve-embedded');
    assert.equal((await exchange(urls, key)).status, 200);
    // Once the schemas are compiled, and a second after serving at the earliest, start-up's memory goes back
    // to the system.
    await server.waitForOutput(/"ms":\d+,"msg":"start-up memory released"/);
    assert.equal(await server.stop('SIGTERM'), 0);
    assert.match(server.output(), /tenantry stopped/);
    // A child process makes the new embedded database and applies every migration.
    assert.match(server.output(), /"migrations":\["0001_[^"]*",.*"msg":"embedded database created and migrated by a separate process"/);
    assert.doesNotMatch(server.output(), /"msg":"database migrated"/);
    assert.ok(!server.output().includes(key), 'no key in the logs');
    // Node's bundled fetch and WebSocket client (undici, with tls, http2 and zlib: 14 MB resident) is
    // never loaded by a server that does not use it (infra/http/node-http.ts).
    const builtins = readFileSync(builtinsFile, 'utf8').split('\n');
    assert.ok(builtins.includes('http'), 'the list is read from the server process');
    assert.ok(!builtins.includes('internal/deps/undici/undici'), 'undici is not loaded');

    // Restarted on the same data directory: same token, same data.
    const again = await spawnServe({ TENANTRY_DATA_DIR: dataDir });
    const urls2 = { partnerUrl: again.partnerUrl, operatorUrl: again.operatorUrl, operatorToken };
    assert.equal((await exchange(urls2, key)).status, 200, 'the key survives a restart');
    assert.equal(await again.stop('SIGTERM'), 0);
    assert.doesNotMatch(again.output(), /separate process|database migrated/, 'an existing database is opened as it is');
  });
});

const postgres = SERVER_DATABASE_URL !== undefined;

describe('several processes on one PostgreSQL database', { skip: postgres ? false : 'TENANTRY_TEST_DATABASE_URL is not set' }, () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  test('start together (migrations under a lock), share rate limits, and see a suspension within 5 s', async () => {
    const url = await createServerDatabase();
    cleanups.push(() => dropServerDatabase(url));
    const operatorToken = 'op-token-for-multi-process-tests';
    const env = { TENANTRY_DATABASE_URL: url, TENANTRY_OPERATOR_TOKEN: operatorToken, TENANTRY_SANDBOX_DELAY_MS: '0' };
    const [a, b] = await Promise.all([spawnServe(env), spawnServe(env)]);
    if (!a || !b) throw new Error('both processes start');
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    const onA = { partnerUrl: a.partnerUrl, operatorUrl: a.operatorUrl, operatorToken };
    const onB = { partnerUrl: b.partnerUrl, operatorUrl: b.operatorUrl, operatorToken };

    // Created through A, used through B.
    const partner = await partnerWithToken(onA, 'multi', { settings: { limits: { rate_limit_per_minute: 6, rate_limit_burst: 10 } } });

    // One bucket for both processes: 10 requests in all, then 429 on either. A process may
    // hold a reserved token for a moment, so the order of successes may interleave.
    const statuses: number[] = [];
    for (let i = 0; i < 16; i++) {
      statuses.push((await partnerApi(i % 2 === 0 ? onA : onB, 'GET', '/auth/whoami', { token: partner.token })).status);
    }
    assert.equal(statuses.filter((s) => s === 200).length, 10, statuses.join(','));
    assert.deepEqual(statuses.slice(12), [429, 429, 429, 429]);

    // Concurrent requests on both processes never take more than the bucket holds.
    const burst = await partnerWithToken(onA, 'multi-burst', { settings: { limits: { rate_limit_per_minute: 6, rate_limit_burst: 10 } } });
    const concurrent = await Promise.all(
      Array.from({ length: 30 }, (_, i) => partnerApi(i % 2 === 0 ? onA : onB, 'GET', '/auth/whoami', { token: burst.token })),
    );
    const allowed = concurrent.filter((r) => r.status === 200).length;
    assert.ok(allowed <= 10, `never more than the burst: ${allowed}`);
    assert.ok(allowed >= 7, `reserved tokens are spent, not lost: ${allowed}`);
    assert.ok(concurrent.every((r) => r.status === 200 || r.status === 429));

    // The token endpoint's per-key limit holds across processes too.
    const key = await issueKey(onA, 'multi');
    const exchanges: number[] = [];
    for (let i = 0; i < 16; i++) exchanges.push((await exchange(i % 2 === 0 ? onA : onB, key)).status);
    assert.equal(exchanges.filter((s) => s === 200).length, 10, exchanges.join(','));
    assert.deepEqual(exchanges.slice(12), [429, 429, 429, 429]);

    // Suspended through A: B refuses the partner's tokens within 5 seconds.
    const second = await partnerWithToken(onA, 'multi-suspend');
    assert.equal((await partnerApi(onB, 'GET', '/auth/whoami', { token: second.token })).status, 200);
    const suspended = await http(a.operatorUrl, 'POST', `${OPERATOR_API}/partners/multi-suspend/suspend`, { token: operatorToken });
    assert.equal(suspended.status, 200);
    const started = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - started < 6_000) {
      status = (await partnerApi(onB, 'GET', '/auth/whoami', { token: second.token })).status;
      if (status === 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(status, 403);
    assert.ok(Date.now() - started < 5_000, `seen after ${Date.now() - started} ms`);
    assertError(await exchange(onB, second.key), 403, 'PARTNER_SUSPENDED');
  });

  test('an unreachable database answers 503 UNAVAILABLE with Retry-After, and the service recovers by itself', async () => {
    const url = await createServerDatabase();
    cleanups.push(() => dropServerDatabase(url));
    const proxy = await tcpProxy(new URL(url).port ? Number(new URL(url).port) : 5432);
    const proxied = new URL(url);
    proxied.port = String(proxy.port);
    const target: TestDatabase = {
      name: 'postgres',
      create: async () => {
        const { openAppDatabase } = await import('../src/app/database.ts');
        const handle = await openAppDatabase({ kind: 'postgres', url: proxied.toString() });
        return { handle, url: proxied.toString(), drop: () => handle.close() };
      },
    };
    cleanups.push(() => proxy.close());
    const server = await startTestServer(target);
    cleanups.push(() => server.stop());
    const partner = await partnerWithToken(server, 'db-down');

    proxy.cut();
    const down = await exchange(server, partner.key);
    assertError(down, 503, 'UNAVAILABLE');
    assert.equal(down.headers.get('retry-after'), '5');
    const ready = await http(server.partnerUrl, 'GET', '/readyz');
    assertError(ready, 503, 'UNAVAILABLE');
    assert.equal((await http(server.partnerUrl, 'GET', '/healthz')).status, 200, 'alive while the database is away');

    proxy.restore();
    const started = Date.now();
    let status = 0;
    while (status !== 200 && Date.now() - started < 10_000) {
      status = (await exchange(server, partner.key)).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.equal(status, 200, 'recovered without a restart');
  });
});

/** A TCP proxy to the local PostgreSQL whose connections can be cut and refused, then allowed again. */
async function tcpProxy(targetPort: number): Promise<{ port: number; cut(): void; restore(): void; close(): Promise<void> }> {
  const { connect } = await import('node:net');
  let open = true;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy address');
  return {
    port: address.port,
    cut: () => {
      open = false;
      for (const socket of sockets) socket.destroy();
    },
    restore: () => {
      open = true;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
