import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startTestServer, type TestServer, testDatabases } from '../../server/test/harness.ts';
import { findNode20, NO_NODE20 } from '../../server/test/node20.ts';
import { partnerWithModes, type Tokens } from '../../server/test/provisioning.ts';

const run = promisify(execFile);
const SDK = fileURLToPath(new URL('..', import.meta.url));
const BIN = fileURLToPath(new URL('../../../node_modules/.bin/', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const NODE20 = findNode20();
const VERSION = (JSON.parse(readFileSync(join(SDK, 'package.json'), 'utf8')) as { version: string }).version;
const env = { ...process.env, PATH: `${BIN}:${process.env.PATH ?? ''}`, npm_config_audit: 'false', npm_config_fund: 'false' };

/**
 * The package as published: `npm pack` builds it, a small consumer project installs the tarball and
 * compiles against it with strict settings and no Node types (a fetch runtime), then runs it against
 * the real server on this Node and, where one is installed, on Node 20 (the oldest the SDK supports:
 * `.ci/run` installs it and names it in TENANTRY_TEST_NODE20).
 */
const CONSUMER_TS = `import {
  Tenantry,
  TenantryConnectionError,
  TenantryError,
  TenantryTimeoutError,
  verifyWebhook,
  signTestWebhook,
  handleOnce,
  memoryDedupeStore,
  type Customer,
  type Quota,
  type WebhookEvent,
} from '@tenantry/sdk';
const client = new Tenantry({ apiKey: 'tnt_live_x', baseUrl: 'https://api.example.com' });
export async function main(): Promise<string[]> {
  const ids: string[] = [];
  for await (const customer of client.customers.list({ limit: 10, status: 'active' })) ids.push(customer.id);
  const { operation } = await client.customers.create({ id: 'c', owner: { username: 'o', email: 'o@c.example' } });
  const done = await client.operations.wait('c', operation.id);
  if (done.error) ids.push(done.error.code);
  const quota: Quota = await client.customers.quota.get('c');
  await client.customers.quota.update('c', { revision: quota.revision, quota: { ...quota.quota, vcpu: 8 } });
  const stop = new AbortController();
  const customer = await client.customers.get('c', { timeout: 5_000, signal: stop.signal });
  const requestId: string | undefined = customer.lastResponse.requestId;
  if (requestId) ids.push(requestId);
  // @ts-expect-error: timeout is a number of milliseconds
  await client.customers.get('c', { timeout: '5s' });
  // @ts-expect-error: the body's owner is required
  await client.customers.create({ id: 'd' });
  // @ts-expect-error: not a customer status
  client.customers.list({ status: 'sleeping' });
  return ids;
}
export const name = (customer: Customer): string => customer.display_name ?? customer.id;
export function isBusy(error: unknown): boolean {
  return error instanceof TenantryError && error.code === 'BUSY' && (error.retryAfter ?? 0) > 0;
}
export function unreachable(error: unknown): string | undefined {
  if (error instanceof TenantryTimeoutError) return \`\${error.url} after \${error.timeout} ms\`;
  return error instanceof TenantryConnectionError ? error.url : undefined;
}
/** The union narrows on \`event\`; an event this version does not know lands in \`default\`. */
export function describe(event: WebhookEvent): string {
  switch (event.event) {
    case 'customer.suspended':
      return event.data.suspended_at;
    case 'customer.quota_changed':
      return String(event.data.quota.quota.vcpu);
    case 'project.deleted':
      // @ts-expect-error: project.deleted carries no operation
      return event.data.operation_id;
    default:
      return event.event;
  }
}
export async function receive(raw: Uint8Array, headers: Headers): Promise<WebhookEvent> {
  const event = await verifyWebhook(raw, headers, ['secret']);
  await handleOnce(event, memoryDedupeStore(), () => undefined);
  return event;
}
const signed = await signTestWebhook({ id: 'dlv_1', event: 'ping', created_at: '', partner_id: 'p', data: { message: 'hi' } }, 's'.repeat(64));
const verified = await verifyWebhook(signed.body, signed.headers, 's'.repeat(64));
console.log(verified.id);
`;

/**
 * Plain JavaScript, as the package ships it: the client against the real server, a signed round trip,
 * and a server that never answers and one that is gone.
 */
const CONSUMER_RUN = `import { createServer } from 'node:http';
import { once } from 'node:events';
import { Tenantry, TenantryConnectionError, TenantryTimeoutError, signTestWebhook, verifyWebhook } from '@tenantry/sdk';
const client = new Tenantry({ apiKey: process.env.API_KEY, baseUrl: process.env.BASE_URL });
const id = process.env.CUSTOMER_ID;
const { operation } = await client.customers.create({ id, owner: { username: 'o', email: 'o@' + id + '.example' } });
const done = await client.operations.wait(id, operation.id, { intervalMs: 20, timeoutMs: 30000 });
const listed = [];
for await (const customer of client.customers.list({ limit: 1 })) listed.push(customer.id);
const s = 's'.repeat(64);
const signed = await signTestWebhook({ id: 'dlv_1', event: 'ping', created_at: '', partner_id: 'p', data: { message: 'hi' } }, s);
const verified = await verifyWebhook(signed.body, signed.headers, s);
const silent = createServer(() => {}).listen(0, '127.0.0.1');
await once(silent, 'listening');
const baseUrl = 'http://127.0.0.1:' + silent.address().port;
const hung = await new Tenantry({ apiKey: 'tnt_test_x', baseUrl, maxRetries: 0 }).auth.whoami({ timeout: 200 }).catch((e) => e);
silent.closeAllConnections();
silent.close();
await once(silent, 'close');
const gone = await new Tenantry({ apiKey: 'tnt_test_x', baseUrl, maxRetries: 0 }).auth.whoami().catch((e) => e);
console.log(JSON.stringify({
  node: process.versions.node,
  status: done.status,
  requestId: done.lastResponse.requestId.startsWith('req_'),
  listed: listed.includes(id),
  verified: verified.id,
  timedOut: hung instanceof TenantryTimeoutError,
  refused: gone instanceof TenantryConnectionError && gone.message.includes(baseUrl),
}));
`;

/** A CommonJS project: `require()` (Node 20.19+, 22.12+) and `import()` give the same module. */
const CONSUMER_CJS = `const required = require('@tenantry/sdk');
import('@tenantry/sdk').then((imported) => {
  console.log(JSON.stringify({ same: imported.Tenantry === required.Tenantry, version: required.VERSION }));
});
`;

const target = testDatabases()[0];
if (target) {
  describe('@tenantry/sdk as published', { timeout: 180_000 }, () => {
    let work: string;
    let consumer: string;
    let server: TestServer;
    let partner: Tokens;
    let installOutput = '';
    before(async () => {
      work = mkdtempSync(join(tmpdir(), 'tenantry-sdk-'));
      await run('npm', ['pack', '--pack-destination', work], { cwd: SDK, env });
      const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
      assert.ok(tarball, 'npm pack wrote a tarball');
      consumer = join(work, 'consumer');
      await run('mkdir', ['-p', consumer]);
      writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
      const installed = await run('npm', ['install', '--offline', '--no-package-lock', join(work, tarball)], { cwd: consumer, env });
      installOutput = installed.stdout + installed.stderr;
      server = await startTestServer(target);
      partner = await partnerWithModes(server, 'sdk-package');
    });
    after(async () => {
      rmSync(work, { recursive: true, force: true });
      await server.stop();
    });

    test('installing the tarball runs no install script: npm has nothing to ask approval for', () => {
      assert.doesNotMatch(installOutput, /install-scripts|allowScripts|prepare/);
    });

    test('a strict consumer project with no Node types compiles against the published types', async () => {
      writeFileSync(
        join(consumer, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'es2022',
            module: 'nodenext',
            moduleResolution: 'nodenext',
            lib: ['es2022', 'dom'],
            types: [],
            strict: true,
            noEmit: true,
          },
          include: ['app.ts'],
        }),
      );
      writeFileSync(join(consumer, 'app.ts'), CONSUMER_TS);
      const compiled = await run('tsc', ['-p', consumer], { cwd: consumer, env }).catch((error: { stdout?: string }) => error);
      // The @ts-expect-error lines make loose types fail too: an expectation that no longer errors is an error.
      assert.equal((compiled as { stdout?: string }).stdout ?? '', '', 'the consumer type-checks against the published types');
    });

    const runtimes: [string, string | undefined][] = [
      [`this Node (${process.versions.node})`, process.execPath],
      ['Node 20', NODE20],
    ];
    for (const [label, node] of runtimes) {
      test(`the published JavaScript runs against the real server on ${label}`, {
        skip: node ? false : NO_NODE20,
      }, async () => {
        writeFileSync(join(consumer, 'run.mjs'), CONSUMER_RUN);
        const customerId = `pkg-${label.includes('20') ? 'node20' : 'current'}`;
        const ran = await run(node ?? '', ['run.mjs'], {
          cwd: consumer,
          env: { ...env, API_KEY: partner.liveKey, BASE_URL: server.partnerUrl, CUSTOMER_ID: customerId },
        });
        const result = JSON.parse(ran.stdout.trim()) as Record<string, unknown>;
        if (label === 'Node 20') assert.match(String(result.node), /^20\./);
        assert.deepEqual(
          { ...result, node: undefined },
          { node: undefined, status: 'succeeded', requestId: true, listed: true, verified: 'dlv_1', timedOut: true, refused: true },
        );
      });

      test(`a CommonJS project requires and imports it on ${label}`, { skip: node ? false : NO_NODE20 }, async () => {
        writeFileSync(join(consumer, 'cjs.cjs'), CONSUMER_CJS);
        const ran = await run(node ?? '', ['cjs.cjs'], { cwd: consumer, env });
        assert.deepEqual(JSON.parse(ran.stdout.trim()), { same: true, version: VERSION });
      });
    }
  });
}

/** The repository's files as a clone has them (tracked files, as they are in the working tree): no node_modules, no dist. */
function freshClone(): string | undefined {
  let files: string[];
  try {
    files = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  } catch {
    return undefined;
  }
  const clone = mkdtempSync(join(tmpdir(), 'tenantry-clone-'));
  for (const file of files) if (existsSync(join(ROOT, file))) cpSync(join(ROOT, file), join(clone, file));
  return clone;
}

/** A user's shell: no npm variables from the test run around it. */
const userEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));

describe('a fresh clone after npm ci', { timeout: 600_000 }, () => {
  let clone: string | undefined;
  before(async () => {
    clone = freshClone();
    if (clone) await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: clone, env: userEnv, maxBuffer: 1 << 24 });
  });
  after(() => {
    if (clone) rmSync(clone, { recursive: true, force: true });
  });

  // The README's import line, from a script in the repository: npm ci built the SDK (the root's `prepare` script).
  const SCRIPT = `import { Tenantry, verifyWebhook } from '@tenantry/sdk';
const client = new Tenantry({ apiKey: 'tnt_test_x', baseUrl: 'http://127.0.0.1:9' });
console.log(JSON.stringify({ node: process.versions.node, client: typeof client.customers.list, verify: typeof verifyWebhook }));
`;
  const runtimes: [string, () => string | undefined][] = [
    ["the project's Node 24", () => (clone ? join(clone, 'node_modules', '.bin', 'node') : undefined)],
    ["the machine's Node 20", () => NODE20],
  ];
  for (const [label, node] of runtimes) {
    test(`import { Tenantry } from '@tenantry/sdk' works on ${label}`, {
      skip: label.includes('20') && !NODE20 ? NO_NODE20 : false,
    }, async (t) => {
      if (!clone) return t.skip('not a git checkout: there is no clone to make');
      writeFileSync(join(clone, 'try-sdk.mjs'), SCRIPT);
      const ran = await run(node() ?? '', ['try-sdk.mjs'], { cwd: clone, env: userEnv });
      const result = JSON.parse(ran.stdout) as { node: string; client: string; verify: string };
      assert.match(result.node, label.includes('20') ? /^20\./ : /^24\./);
      assert.deepEqual({ client: result.client, verify: result.verify }, { client: 'function', verify: 'function' });
    });
  }
});
