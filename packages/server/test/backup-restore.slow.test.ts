import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createPartner, exchange, issueKey, partnerApi } from './client.ts';
import { type PostgresInstance, runProgram, skipWithoutPostgresPrograms, startFromBaseBackup, startPostgres } from './postgres-instance.ts';
import { customerBody } from './provisioning.ts';
import { type ServeProcess, spawnServe } from './serve-process.ts';

/**
 * The two backups docs/operations.md recommends, each restored and served by a new `tenantry serve`
 * with the deployment's secret key: a logical dump (`pg_dump -Fc`, `pg_restore` into a new database on
 * another server) and a physical copy of the running server (`pg_basebackup`, started as a server of
 * its own). On each, the partner's key still exchanges for a token, a token issued before the backup is
 * still accepted, and the customers read back as they were; without the secret key the copy is refused.
 */
const OPERATOR_TOKEN = randomBytes(24).toString('hex');
const CUSTOMERS = ['globex', 'initech', 'umbrella'];
const DATABASE = 'tenantry';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function sql<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

/** `tenantry serve` on `url`, as a deployment on PostgreSQL runs it (spawnServe gives it the shared secret key). */
function serve(url: string, env: Record<string, string> = {}): Promise<ServeProcess> {
  return spawnServe({ TENANTRY_DATABASE_URL: url, TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN, TENANTRY_SANDBOX_DELAY_MS: '300', ...env });
}

const urlsOf = (running: ServeProcess) => ({
  partnerUrl: running.partnerUrl,
  operatorUrl: running.operatorUrl,
  operatorToken: OPERATOR_TOKEN,
});

/** What a partner sees of its customers: the list, and each customer with its projects. */
async function customersSeen(running: ServeProcess, token: string): Promise<unknown[]> {
  const server = urlsOf(running);
  const list = await partnerApi<{ data: unknown[] }>(server, 'GET', '/customers?limit=50', { token });
  assert.equal(list.status, 200, list.text);
  const each = await Promise.all(
    CUSTOMERS.map(async (id) => {
      const read = await partnerApi<{ data: unknown }>(server, 'GET', `/customers/${id}`, { token });
      assert.equal(read.status, 200, read.text);
      return read.body.data;
    }),
  );
  return [list.body.data, ...each];
}

describe('backups of a PostgreSQL deployment, restored and served', {
  skip: skipWithoutPostgresPrograms(['pg_dump', 'pg_restore', 'pg_verifybackup']),
}, () => {
  const instances: PostgresInstance[] = [];
  const processes: ServeProcess[] = [];
  let source: PostgresInstance;
  let key: string;
  let tokenBefore: string;
  let seenBefore: unknown[];

  before(async () => {
    source = await startPostgres();
    instances.push(source);
    await sql(source.url(), `create database ${DATABASE}`);
    const running = await serve(source.url(DATABASE));
    processes.push(running);
    const server = urlsOf(running);
    await createPartner(server, 'acme', { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 } });
    key = await issueKey(server, 'acme');
    // A new partner's credentials are ready after a third of the sandbox's delay (503 until then).
    for (let exchanged = await exchange(server, key); ; exchanged = await exchange(server, key)) {
      if (exchanged.status === 200) {
        tokenBefore = exchanged.body.access_token;
        break;
      }
      assert.equal(exchanged.status, 503, exchanged.text);
      await sleep(100);
    }
    for (const id of CUSTOMERS) {
      const created = await partnerApi(server, 'POST', '/customers', { token: tokenBefore, body: customerBody(id, { display_name: id }) });
      assert.equal(created.status, 202, created.text);
    }
    const deadline = Date.now() + 20_000;
    for (;;) {
      const active = await partnerApi<{ data: unknown[] }>(server, 'GET', '/customers?status=active', { token: tokenBefore });
      if (active.body.data.length === CUSTOMERS.length) break;
      assert.ok(Date.now() < deadline, `customers not active: ${active.text}`);
      await sleep(50);
    }
    seenBefore = await customersSeen(running, tokenBefore);
  });
  after(async () => {
    for (const running of processes) await running.stop('SIGKILL');
    for (const instance of instances) await instance.remove();
  });

  /**
   * A new `tenantry serve` on a restored copy: refused without the deployment's secret key; with it, the
   * partner's key, a token from before the backup and the customers, as they were.
   */
  async function servesAsBefore(url: string): Promise<void> {
    await assert.rejects(
      serve(url, { TENANTRY_SECRET_KEY: 'c3'.repeat(32) }),
      /exited with 2: .*cannot start: TENANTRY_SECRET_KEY: .*sealed with secret key/s,
      'another secret key does not open the copy',
    );
    const restored = await serve(url);
    processes.push(restored);
    const server = urlsOf(restored);
    const exchanged = await exchange(server, key);
    assert.equal(exchanged.status, 200, `the partner's key exchanges on the restored copy: ${exchanged.text}`);
    const whoami = await partnerApi<{ data: { partner: { id: string } } }>(server, 'GET', '/auth/whoami', { token: tokenBefore });
    assert.equal(whoami.status, 200, `a token issued before the backup is accepted: ${whoami.text}`);
    assert.equal(whoami.body.data.partner.id, 'acme');
    assert.deepEqual(await customersSeen(restored, exchanged.body.access_token), seenBefore, 'the customers read back as they were');
    assert.equal(await restored.stop('SIGTERM'), 0);
  }

  test('pg_dump -Fc, pg_restore into a new database on another server', async () => {
    const target = await startPostgres();
    instances.push(target);
    // The dump file sits in the target's own folder, which the server programs' user may write.
    const file = join(dirname(target.dataDir), `${DATABASE}.dump`);
    runProgram('pg_dump', ['-Fc', '-f', file, '-d', source.url(DATABASE)]);
    await sql(target.url(), `create database ${DATABASE}`);
    runProgram('pg_restore', ['--exit-on-error', '--no-owner', '-d', target.url(DATABASE), file]);
    await servesAsBefore(target.url(DATABASE));
  });

  test('pg_basebackup of the running server, started as a server of its own', async () => {
    const buckets = await sql<{ n: number }>(source.url(DATABASE), 'select count(*)::int as n from rate_limits');
    assert.ok(buckets[0] && buckets[0].n > 0, 'the running server keeps rate-limit buckets');
    const copy = await startFromBaseBackup(source);
    instances.push(copy);
    // An unlogged table's rows are not in a physical copy: every bucket starts full there.
    assert.deepEqual(await sql(copy.url(DATABASE), 'select count(*)::int as n from rate_limits'), [{ n: 0 }]);
    await servesAsBefore(copy.url(DATABASE));
  });
});
