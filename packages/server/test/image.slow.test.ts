import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';

// The container image of `npm run image` (the Containerfile), run as the chart runs it. It is built
// apart (minutes the first time), so the test takes the image by name; .ci/run builds it and names it.
const IMAGE = process.env.TENANTRY_TEST_IMAGE;
const SKIP = IMAGE
  ? false
  : 'TENANTRY_TEST_IMAGE is not set: build the image with `npm run image -- --local-base`, then set it to tenantry:<version>';
const TOKEN = 'image-test-operator-token-0123456789';
const READY_WITHIN_MS = 240_000;

interface ImageConfig {
  User: string;
  Entrypoint: string[];
  Cmd: string[];
  Env: string[];
  Volumes: Record<string, unknown>;
  ExposedPorts: Record<string, unknown>;
}

const run = promisify(execFile);

async function buildah(...args: string[]): Promise<string> {
  return (await run('buildah', args, { maxBuffer: 64 * 1024 * 1024 })).stdout.trim();
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** The process that runs `tenantry serve` in the container: the one whose environment names `listen`. */
function serveProcess(listen: string): number {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0');
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'latin1');
      if (environ.includes(`TENANTRY_LISTEN=${listen}`) && cmdline.includes('tenantry')) return Number(entry);
    } catch {
      // A process that ended meanwhile.
    }
  }
  throw new Error(`no process listens on ${listen}`);
}

describe('the container image', { skip: SKIP }, () => {
  const image = IMAGE ?? '';
  let config: ImageConfig;
  let healthcheck: string[];
  let container = '';
  let serve: ChildProcess | undefined;

  before(async () => {
    const inspected = JSON.parse(await buildah('inspect', '--type', 'image', image)) as {
      OCIv1: { config: ImageConfig };
      Docker: { config: { Healthcheck?: { Test: string[] } } };
    };
    config = inspected.OCIv1.config;
    healthcheck = inspected.Docker.config.Healthcheck?.Test ?? [];
    container = await buildah('from', '--quiet', image);
  });

  after(async () => {
    serve?.kill('SIGKILL');
    if (container) await buildah('rm', container);
  });

  test('runs `tenantry serve` as the chart does: user 10001, data in /var/lib/tenantry, both APIs on 0.0.0.0', () => {
    assert.equal(config.User, '10001:10001');
    assert.deepEqual(config.Entrypoint, ['tenantry']);
    assert.deepEqual(config.Cmd, ['serve']);
    assert.deepEqual(Object.keys(config.Volumes), ['/var/lib/tenantry']);
    assert.deepEqual(Object.keys(config.ExposedPorts).sort(), ['8080/tcp', '8081/tcp']);
    for (const setting of [
      'TENANTRY_DATA_DIR=/var/lib/tenantry',
      'TENANTRY_LISTEN=0.0.0.0:8080',
      'TENANTRY_OPERATOR_LISTEN=0.0.0.0:8081',
    ]) {
      assert.ok(config.Env.includes(setting), `${setting} in ${config.Env.join(' ')}`);
    }
    assert.equal(healthcheck[0], 'CMD');
  });

  test('serves: /readyz answers 200, the operator API takes its token, the health check passes, SIGTERM drains', {
    timeout: READY_WITHIN_MS + 60_000,
  }, async (t) => {
    // In chroot isolation the container shares this machine's network: loopback, on free ports.
    const listen = `127.0.0.1:${await freePort()}`;
    const operatorListen = `127.0.0.1:${await freePort()}`;
    const inContainer = (env: Record<string, string>, command: string[]) => [
      'run',
      '--isolation',
      'chroot',
      ...Object.entries(env).flatMap(([name, value]) => ['--env', `${name}=${value}`]),
      container,
      '--',
      ...command,
    ];
    const check = () =>
      run('buildah', inContainer({ TENANTRY_LISTEN: listen }, healthcheck.slice(1))).then(
        () => 0,
        (error: { code?: number }) => error.code ?? -1,
      );
    assert.equal(await check(), 1, 'the health check fails while nothing serves');

    const started = performance.now();
    serve = spawn(
      'buildah',
      inContainer({ TENANTRY_LISTEN: listen, TENANTRY_OPERATOR_LISTEN: operatorListen, TENANTRY_OPERATOR_TOKEN: TOKEN }, [
        ...config.Entrypoint,
        ...config.Cmd,
      ]),
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    serve.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    serve.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    const exited = once(serve, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    let status = 0;
    while (status !== 200) {
      assert.equal(serve.exitCode, null, `tenantry serve exited: ${output}`);
      assert.ok(performance.now() - started < READY_WITHIN_MS, `no 200 from /readyz within ${READY_WITHIN_MS} ms: ${output}`);
      status = await fetch(`http://${listen}/readyz`).then(
        (response) => response.status,
        () => 0,
      );
      if (status !== 200) await delay(250);
    }
    t.diagnostic(`/readyz answered 200 ${Math.round(performance.now() - started)} ms after buildah run`);

    const partners = `http://${operatorListen}/api/operator/v1/partners`;
    assert.equal((await fetch(partners, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
    assert.equal((await fetch(partners)).status, 401);
    assert.equal(await check(), 0, 'the health check passes while the server is ready');

    const pid = serveProcess(listen);
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    assert.equal(uid, '10001', 'the server does not run as root');
    // Its data directory, seen through its own root: the key that seals secrets at rest is there.
    assert.ok(existsSync(`/proc/${pid}/root/var/lib/tenantry/secret-key`));

    // The entrypoint leaves Node as the container's process, so a runtime's SIGTERM reaches the server.
    process.kill(pid, 'SIGTERM');
    const [code] = await exited;
    serve = undefined;
    assert.equal(code, 0, output);
    assert.match(output, /SIGTERM received, draining requests/);
  });
});
