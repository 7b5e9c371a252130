import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { findExposed } from '../src/infra/data-dir.ts';
import { runCli } from './cli-runner.ts';
import { createPartner, exchange, issueKey } from './client.ts';
import { type ServeProcess, spawnServe as spawn } from './serve-process.ts';

/**
 * Issue 13, sections 1 and 2, on real processes: the data directory is owner-only and start-up
 * refuses one that is not; one process at a time opens an embedded database, and a lock left by
 * a killed process is taken over.
 */
describe('the data directory', () => {
  const newDataDir = () => join(mkdtempSync(join(tmpdir(), 'tenantry-data-')), 'data');
  // A failed assertion must not leave a server running (the test file would never end).
  const started: ServeProcess[] = [];
  const spawnServe = async (...args: Parameters<typeof spawn>) => {
    const server = await spawn(...args);
    started.push(server);
    return server;
  };
  after(async () => {
    for (const server of started) await server.stop('SIGKILL');
  });

  test('is created owner-only, everything in it included; the secret key is a 0600 file beside the database', async () => {
    const dataDir = newDataDir();
    const server = await spawnServe({ TENANTRY_DATA_DIR: dataDir, TENANTRY_SANDBOX_DELAY_MS: '0' });
    const operatorToken = readFileSync(join(dataDir, 'operator-token'), 'utf8').trim();
    const urls = { partnerUrl: server.partnerUrl, operatorUrl: server.operatorUrl, operatorToken };
    await createPartner(urls, 'modes');
    const key = await issueKey(urls, 'modes');
    assert.equal((await exchange(urls, key)).status, 200);
    assert.equal(statSync(dataDir).mode & 0o777, 0o700);
    assert.equal(statSync(join(dataDir, 'secret-key')).mode & 0o777, 0o600);
    assert.deepEqual(
      findExposed(dataDir).map((e) => `${e.path} ${e.mode.toString(8)}`),
      [],
      'no file or folder gives group or others any access while serving',
    );
    assert.ok(readdirSync(join(dataDir, 'db')).length > 5, 'the database lives there');
    assert.equal(await server.stop('SIGTERM'), 0);
    assert.deepEqual(findExposed(dataDir), [], 'nor after a clean stop');
    assert.equal(existsSync(join(dataDir, 'db.lock')), false, 'the lock is released on stop');
  });

  test('start-up refuses a directory other users can read, with one line; --fix-permissions repairs it', async () => {
    const dataDir = newDataDir();
    const first = await spawnServe({ TENANTRY_DATA_DIR: dataDir });
    assert.equal(await first.stop('SIGTERM'), 0);
    const dbFile = join(dataDir, 'db', 'PG_VERSION');
    chmodSync(dbFile, 0o644);
    chmodSync(dataDir, 0o755);

    const refused = await runCli(['serve'], {
      TENANTRY_DATA_DIR: dataDir,
      TENANTRY_LISTEN: '127.0.0.1:0',
      TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
    });
    assert.equal(refused.code, 2, refused.stderr);
    assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
    assert.match(refused.stderr, /^tenantry: cannot start: TENANTRY_DATA_DIR: .* is open to other users .*--fix-permissions/);
    assert.equal(statSync(dbFile).mode & 0o777, 0o644, 'refusing changes nothing');

    const repaired = await spawnServe({ TENANTRY_DATA_DIR: dataDir }, { args: ['--fix-permissions'] });
    assert.equal(statSync(dataDir).mode & 0o777, 0o700);
    assert.equal(statSync(dbFile).mode & 0o777, 0o600);
    assert.deepEqual(findExposed(dataDir), []);
    assert.equal(await repaired.stop('SIGTERM'), 0);
  });

  test('a second process on one embedded database refuses with one line naming the directory and the holder', async () => {
    const dataDir = newDataDir();
    const holder = await spawnServe({ TENANTRY_DATA_DIR: dataDir });
    const second = await runCli(['serve'], {
      TENANTRY_DATA_DIR: dataDir,
      TENANTRY_LISTEN: '127.0.0.1:0',
      TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
    });
    assert.equal(second.code, 1, second.stderr);
    assert.equal(second.stderr.trim().split('\n').length, 1, second.stderr);
    assert.match(second.stderr, new RegExp(`the embedded database in ${join(dataDir, 'db')} is in use by process ${holder.child.pid}`));
    const health = await fetch(`${holder.partnerUrl}/readyz`);
    assert.equal(health.status, 200, 'the holder keeps serving');
    assert.equal(await holder.stop('SIGTERM'), 0);
  });

  test('a lock left by a kill -9 is taken over, and the data written before the kill is there', async () => {
    const dataDir = newDataDir();
    const first = await spawnServe({ TENANTRY_DATA_DIR: dataDir, TENANTRY_SANDBOX_DELAY_MS: '0' });
    const operatorToken = readFileSync(join(dataDir, 'operator-token'), 'utf8').trim();
    await createPartner({ partnerUrl: first.partnerUrl, operatorUrl: first.operatorUrl, operatorToken }, 'survivor');
    const key = await issueKey({ partnerUrl: first.partnerUrl, operatorUrl: first.operatorUrl, operatorToken }, 'survivor');
    await first.stop('SIGKILL');
    assert.ok(existsSync(join(dataDir, 'db.lock')), 'a killed process leaves its lock behind');

    const second = await spawnServe({ TENANTRY_DATA_DIR: dataDir, TENANTRY_SANDBOX_DELAY_MS: '0' });
    const lock = JSON.parse(readFileSync(join(dataDir, 'db.lock'), 'utf8')) as { pid: number };
    assert.equal(lock.pid, second.child.pid, 'the new process holds the lock');
    const urls = { partnerUrl: second.partnerUrl, operatorUrl: second.operatorUrl, operatorToken };
    assert.equal((await exchange(urls, key)).status, 200, 'the key issued before the kill works');
    assert.equal(await second.stop('SIGTERM'), 0);
  });

  test("a used data directory's key is never replaced: a missing or wrong key is refused, naming where it came from", async () => {
    const dataDir = newDataDir();
    const first = await spawnServe({ TENANTRY_DATA_DIR: dataDir });
    assert.equal(await first.stop('SIGTERM'), 0);
    const keyFile = join(dataDir, 'secret-key');
    const key = readFileSync(keyFile, 'utf8');
    const refusal = async (env: Record<string, string>) => {
      const result = await runCli(['serve'], {
        TENANTRY_DATA_DIR: dataDir,
        TENANTRY_LISTEN: '127.0.0.1:0',
        TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
        ...env,
      });
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      return result.stderr;
    };

    rmSync(keyFile);
    const missing = await refusal({});
    assert.match(missing, /^tenantry: cannot start: TENANTRY_DATA_DIR: /);
    assert.ok(missing.includes(`the secret key file ${keyFile} is missing`), missing);
    assert.equal(existsSync(keyFile), false, 'no new key is written beside sealed secrets');

    const other = `${'c3'.repeat(32)}\n`;
    writeFileSync(keyFile, other, { mode: 0o600 });
    const wrongFile = await refusal({});
    assert.match(wrongFile, /^tenantry: cannot start: TENANTRY_DATA_DIR: /);
    assert.ok(wrongFile.includes(keyFile), wrongFile);
    assert.doesNotMatch(wrongFile, /TENANTRY_SECRET_KEY/);
    assert.equal(readFileSync(keyFile, 'utf8'), other, 'the file is left as it was');
    const mounted = join(dataDir, '..', 'mounted-key');
    writeFileSync(mounted, other, { mode: 0o600 });
    const wrongMounted = await refusal({ TENANTRY_SECRET_KEY_FILE: mounted });
    assert.match(wrongMounted, /^tenantry: cannot start: TENANTRY_SECRET_KEY_FILE: /);
    assert.ok(wrongMounted.includes(mounted), wrongMounted);
    const wrongVariable = await refusal({ TENANTRY_SECRET_KEY: other.trim() });
    assert.match(wrongVariable, /^tenantry: cannot start: TENANTRY_SECRET_KEY: .*sealed with secret key/);
    assert.ok(!wrongVariable.includes(keyFile), wrongVariable);

    writeFileSync(keyFile, key, { mode: 0o600 });
    const restored = await spawnServe({ TENANTRY_DATA_DIR: dataDir });
    assert.equal(await restored.stop('SIGTERM'), 0, 'the right key opens it again');
  });

  test('secret-key rotate puts a new key first; the next start seals everything with it, and the old key can then go', async () => {
    const dataDir = newDataDir();
    const first = await spawnServe({ TENANTRY_DATA_DIR: dataDir, TENANTRY_SANDBOX_DELAY_MS: '0' });
    const operatorToken = readFileSync(join(dataDir, 'operator-token'), 'utf8').trim();
    await createPartner({ partnerUrl: first.partnerUrl, operatorUrl: first.operatorUrl, operatorToken }, 'rotor');
    const key = await issueKey({ partnerUrl: first.partnerUrl, operatorUrl: first.operatorUrl, operatorToken }, 'rotor');
    assert.equal(await first.stop('SIGTERM'), 0);

    const generated = await runCli(['secret-key', 'generate'], {});
    assert.match(generated.stdout, /^[0-9a-f]{64}\n$/);
    const rotated = await runCli(['secret-key', 'rotate', '--data-dir', dataDir, '--json'], {});
    assert.equal(rotated.code, 0, rotated.stderr);
    const { active_key_id: activeKeyId, previous_key_ids: previous } = JSON.parse(rotated.stdout) as {
      active_key_id: string;
      previous_key_ids: string[];
    };
    assert.equal(previous.length, 1);
    const keyFile = join(dataDir, 'secret-key');
    assert.equal(readFileSync(keyFile, 'utf8').trim().split('\n').length, 2);
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);

    const second = await spawnServe({ TENANTRY_DATA_DIR: dataDir });
    assert.match(second.output(), new RegExp(`"secret_key":\\{"id":"${activeKeyId}"`), 'serving with the new key');
    assert.equal(await second.stop('SIGTERM'), 0);
    // Everything is sealed with the new key now: the old line can go.
    const [newest] = readFileSync(keyFile, 'utf8').trim().split('\n');
    writeFileSync(keyFile, `${newest}\n`, { mode: 0o600 });
    const third = await spawnServe({ TENANTRY_DATA_DIR: dataDir });
    const urls = { partnerUrl: third.partnerUrl, operatorUrl: third.operatorUrl, operatorToken };
    assert.equal((await exchange(urls, key)).status, 200, 'the data sealed before the rotation opens with the new key alone');
    assert.equal(await third.stop('SIGTERM'), 0);
  });
});
