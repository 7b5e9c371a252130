import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const SDK = fileURLToPath(new URL('..', import.meta.url));
const BIN = fileURLToPath(new URL('../../../node_modules/.bin/', import.meta.url));
const env = { ...process.env, PATH: `${BIN}:${process.env.PATH ?? ''}`, npm_config_audit: 'false', npm_config_fund: 'false' };

/**
 * The package as published: `npm pack` builds it, a small consumer project installs the tarball and
 * compiles against it with strict settings and no Node types (a fetch runtime), then runs it.
 */
test('a consumer project compiles and runs against the packed @tenantry/sdk', { timeout: 120_000 }, async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'tenantry-sdk-'));
  t.after(() => rmSync(work, { recursive: true, force: true }));
  await run('npm', ['pack', '--pack-destination', work], { cwd: SDK, env });
  const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
  assert.ok(tarball, 'npm pack wrote a tarball');
  const consumer = join(work, 'consumer');
  await run('mkdir', ['-p', consumer]);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
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
  writeFileSync(
    join(consumer, 'app.ts'),
    `import { Tenantry, TenantryError, verifyWebhook, signTestWebhook, handleOnce, memoryDedupeStore, type WebhookEvent } from '@tenantry/sdk';
const client = new Tenantry({ apiKey: 'tnt_live_x', baseUrl: 'https://api.example.com' });
export async function main(): Promise<string[]> {
  const ids: string[] = [];
  for await (const customer of client.customers.list({ limit: 10 })) ids.push(customer.id);
  const { operation } = await client.customers.create({ id: 'c' });
  const done = await client.operations.wait('c', operation.id);
  if (done.error) ids.push(done.error.code);
  return ids;
}
export function isBusy(error: unknown): boolean {
  return error instanceof TenantryError && error.code === 'BUSY' && (error.retryAfter ?? 0) > 0;
}
export async function receive(raw: Uint8Array, headers: Headers): Promise<WebhookEvent> {
  const event = await verifyWebhook(raw, headers, ['secret']);
  await handleOnce(event, memoryDedupeStore(), () => undefined);
  return event;
}
const signed = await signTestWebhook({ id: 'dlv_1', event: 'ping', created_at: '', partner_id: 'p', data: {} }, 's'.repeat(64));
const verified = await verifyWebhook(signed.body, signed.headers, 's'.repeat(64));
console.log(verified.id);
`,
  );
  await run('npm', ['install', '--offline', '--no-package-lock', join(work, tarball)], { cwd: consumer, env });
  const compiled = await run('tsc', ['-p', consumer], { cwd: consumer, env }).catch((error: { stdout?: string }) => error);
  assert.equal((compiled as { stdout?: string }).stdout ?? '', '', 'the consumer type-checks against the published types');
  // And the built JavaScript runs: sign and verify a test delivery.
  writeFileSync(
    join(consumer, 'run.mjs'),
    `import { signTestWebhook, verifyWebhook } from '@tenantry/sdk';
const s = 's'.repeat(64);
const signed = await signTestWebhook({ id: 'dlv_1', event: 'ping', created_at: '', partner_id: 'p', data: {} }, s);
console.log((await verifyWebhook(signed.body, signed.headers, s)).id);`,
  );
  const ran = await run(process.execPath, ['run.mjs'], { cwd: consumer, env });
  assert.equal(ran.stdout.trim(), 'dlv_1');
});
