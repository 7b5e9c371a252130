import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig } from './config.ts';

import { SETTINGS, type Setting } from './settings.ts';

/** The default platform, without importing a driver: config imports none. */
const platformDrivers = [{ name: 'sandbox', readSettings: () => undefined }];

const read = (relative: string) => readFileSync(fileURLToPath(new URL(relative, import.meta.url)), 'utf8');
const variables = (SETTINGS as readonly Setting[]).map((s) => s.variable);

test('every variable the configuration reads is in the settings table that serve --help prints', () => {
  const source = read('./config.ts') + read('../platform/kubernetes/config.ts');
  const read_ = [...new Set([...source.matchAll(/get\('((?:TENANTRY|OTEL)_[A-Z_]+)'\)/g)].map((m) => m[1]))];
  assert.ok(read_.length >= 10);
  assert.deepEqual(
    read_.filter((v) => !variables.includes(v ?? '')),
    [],
    'read by loadConfig but missing from SETTINGS',
  );
  assert.deepEqual(
    variables.filter((v) => !read_.includes(v)),
    [],
    'in SETTINGS but never read',
  );
});

test('the defaults in the table are the ones loadConfig uses', () => {
  const config = loadConfig(platformDrivers, {});
  assert.equal(`${config.listen.host}:${config.listen.port}`, '127.0.0.1:8080');
  assert.equal(`${config.operatorListen.host}:${config.operatorListen.port}`, '127.0.0.1:8081');
  assert.equal(config.sandboxDelayMs, 3000);
  assert.equal(config.partnerCacheMs, 2000);
  assert.equal(config.logLevel, 'info');
  assert.equal(config.trustProxy, false);
  const byName = Object.fromEntries((SETTINGS as readonly Setting[]).map((s) => [s.variable, s.fallback]));
  assert.deepEqual(
    [byName.TENANTRY_LISTEN, byName.TENANTRY_OPERATOR_LISTEN, byName.TENANTRY_SANDBOX_DELAY_MS, byName.TENANTRY_LOG_LEVEL],
    ['127.0.0.1:8080', '127.0.0.1:8081', '3000', 'info'],
  );
});

test("the README's configuration table has a row for every setting", () => {
  const readme = read('../../../../README.md');
  for (const variable of variables) assert.match(readme, new RegExp(`^\\| \`${variable}\` \\|`, 'm'), `README lacks ${variable}`);
});

test('TENANTRY_ENGINE_CONCURRENCY: unset by default (the database decides), 0 to 8 (0 only with a PostgreSQL server), anything else stops start-up naming the variable', () => {
  const server = { TENANTRY_DATABASE_URL: 'postgres://tenantry@db.internal/tenantry' };
  assert.equal(loadConfig(platformDrivers, {}).engineConcurrency, undefined);
  assert.equal(loadConfig(platformDrivers, { ...server, TENANTRY_ENGINE_CONCURRENCY: '0' }).engineConcurrency, 0);
  assert.equal(loadConfig(platformDrivers, { TENANTRY_ENGINE_CONCURRENCY: '8' }).engineConcurrency, 8);
  // Nothing else could run the operations of the embedded database's only process.
  assert.throws(
    () => loadConfig(platformDrivers, { TENANTRY_ENGINE_CONCURRENCY: '0' }),
    /TENANTRY_ENGINE_CONCURRENCY: 0 leaves operations to another process/,
  );
  for (const bad of ['9', 'all', '-1', '1.5']) {
    assert.throws(() => loadConfig(platformDrivers, { TENANTRY_ENGINE_CONCURRENCY: bad }), /TENANTRY_ENGINE_CONCURRENCY/, bad);
  }
});

test('TENANTRY_WEBHOOK_CONCURRENCY: 64 by default, 1 to 256, anything else stops start-up naming the variable', () => {
  assert.equal(loadConfig(platformDrivers, {}).webhookConcurrency, 64);
  assert.equal(loadConfig(platformDrivers, { TENANTRY_WEBHOOK_CONCURRENCY: '4' }).webhookConcurrency, 4);
  for (const bad of ['0', '257', 'lots', '-1', '2.5']) {
    assert.throws(() => loadConfig(platformDrivers, { TENANTRY_WEBHOOK_CONCURRENCY: bad }), /TENANTRY_WEBHOOK_CONCURRENCY/, bad);
  }
});

test('TENANTRY_DATABASE_STATEMENT_CACHE: 256 by default, 0 (off) to 4096, anything else stops start-up naming the variable', () => {
  assert.equal(loadConfig(platformDrivers, {}).databaseStatementCache, 256);
  assert.equal(loadConfig(platformDrivers, { TENANTRY_DATABASE_STATEMENT_CACHE: '0' }).databaseStatementCache, 0);
  assert.equal(loadConfig(platformDrivers, {}).databasePoolSize, 10);
  assert.equal(loadConfig(platformDrivers, { TENANTRY_DATABASE_POOL_SIZE: '40' }).databasePoolSize, 40);
  assert.throws(() => loadConfig(platformDrivers, { TENANTRY_DATABASE_POOL_SIZE: '0' }), /TENANTRY_DATABASE_POOL_SIZE/);
  for (const bad of ['4097', 'many', '-1', '1.5']) {
    assert.throws(() => loadConfig(platformDrivers, { TENANTRY_DATABASE_STATEMENT_CACHE: bad }), /TENANTRY_DATABASE_STATEMENT_CACHE/, bad);
  }
});

test('TENANTRY_PLATFORM names a driver of the registry it is given, which reads its own settings', () => {
  const third = {
    name: 'third',
    readSettings: (get: (name: string) => string | undefined) => {
      const url = get('TENANTRY_THIRD_URL');
      if (!url) throw new ConfigError('TENANTRY_THIRD_URL', 'is required');
      return { url };
    },
  };
  const drivers = [...platformDrivers, { name: 'kubernetes', readSettings: () => undefined }, third];
  const config = loadConfig(drivers, { TENANTRY_PLATFORM: 'third', TENANTRY_THIRD_URL: 'https://third.example' });
  assert.equal(config.platform, 'third');
  assert.deepEqual(config.platformSettings, { url: 'https://third.example' });
  assert.throws(() => loadConfig(drivers, { TENANTRY_PLATFORM: 'third' }), /^ConfigError: TENANTRY_THIRD_URL: is required$/);
  assert.throws(
    () => loadConfig(drivers, { TENANTRY_PLATFORM: 'fourth' }),
    /TENANTRY_PLATFORM: must be "sandbox", "kubernetes" or "third", got "fourth"/,
  );
});
