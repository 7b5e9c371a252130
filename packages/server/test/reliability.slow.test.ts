import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type AppDatabase as DatabaseHandle, openAppDatabase as openDatabase } from '../src/app/database.ts';
import { LEASE_MS } from '../src/operations/engine.ts';
import { http, OPERATOR_API, PARTNER_API } from './client.ts';
import { createServerDatabase, dropServerDatabase, SERVER_DATABASE_URL } from './harness.ts';
import { type ServeProcess, spawnServe } from './serve-process.ts';

/**
 * kill -9 in the middle of provisioning: after a restart every operation
 * finishes exactly once, no customer stays provisioning, and every outcome
 * has exactly one event. Runs `tenantry serve` as a real process.
 */
const CUSTOMERS = 30;
const OPERATOR_TOKEN = randomBytes(24).toString('hex');

interface Target {
  name: string;
  env(): Promise<Record<string, string>>;
  open(env: Record<string, string>): Promise<DatabaseHandle>;
  cleanup(env: Record<string, string>): Promise<void>;
}

const targets: Target[] = [
  {
    name: 'embedded',
    env: async () => ({ TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-kill-')) }),
    open: (env) => openDatabase({ kind: 'embedded', dataDir: join(env.TENANTRY_DATA_DIR ?? '', 'db') }),
    cleanup: async () => {},
  },
];
if (SERVER_DATABASE_URL) {
  targets.push({
    name: 'postgres',
    env: async () => ({
      TENANTRY_DATABASE_URL: await createServerDatabase(),
      TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-kill-')),
    }),
    open: (env) => openDatabase({ kind: 'postgres', url: env.TENANTRY_DATABASE_URL ?? '' }),
    cleanup: (env) => dropServerDatabase(env.TENANTRY_DATABASE_URL ?? ''),
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const target of targets) {
  describe(`kill -9 during provisioning [${target.name}]`, () => {
    let env: Record<string, string> = {};
    let serve: ServeProcess | undefined;
    after(async () => {
      await serve?.stop('SIGKILL');
      await target.cleanup(env);
    });

    const start = async () => {
      serve = await spawnServe(
        { ...env, TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN, TENANTRY_SANDBOX_DELAY_MS: '1000' },
        { keepOutput: false },
      );
      return serve;
    };

    test('every operation finishes exactly once after two kills, with one event per outcome', async () => {
      env = await target.env();
      let server = await start();
      const operator = (method: string, path: string, body?: unknown) =>
        http<{ data: Record<string, string> }>(server.operatorUrl, method, `${OPERATOR_API}${path}`, { token: OPERATOR_TOKEN, body });
      assert.equal(
        (
          await operator('POST', '/partners', {
            id: 'survivor',
            display_name: 'Survivor',
            // The polling below must not meet the default rate limit (429) on a slow machine.
            limits: { max_open_operations: 100, rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 },
          })
        ).status,
        201,
      );
      const key = (await operator('POST', '/partners/survivor/keys', {})).body.data.key ?? '';
      let token = '';
      for (let i = 0; i < 50 && !token; i++) {
        const exchanged = await http<{ access_token?: string }>(server.partnerUrl, 'POST', `${PARTNER_API}/auth/token`, {
          body: { api_key: key },
        });
        token = exchanged.body.access_token ?? '';
        if (!token) await sleep(100);
      }
      assert.ok(token, 'the partner became ready');
      const api = <T>(method: string, path: string, body?: unknown) =>
        http<T>(server.partnerUrl, method, `${PARTNER_API}${path}`, { token, body });

      const created = await Promise.all(
        Array.from({ length: CUSTOMERS }, (_, i) =>
          api<{ data: { operation: { id: string } } }>('POST', '/customers', {
            id: `c${i}`,
            owner: { username: 'o', email: `o@c${i}.example` },
          }),
        ),
      );
      assert.deepEqual(new Set(created.map((r) => r.status)), new Set([202]));
      const operations = created.map((r, i) => `/customers/c${i}/operations/${r.body.data.operation.id}`);
      const statuses = async () =>
        Promise.all(operations.map(async (path) => (await api<{ data: { status: string } }>('GET', path)).body.data.status));

      // The first kill lands once the engine has claimed work and started it (an operation is running):
      // the restarted process must take over steps a dead one held.
      let seen = await statuses();
      while (!seen.includes('running')) {
        assert.ok(
          seen.every((status) => status === 'pending'),
          `the kill must land mid-provisioning: ${seen.join(',')}`,
        );
        await sleep(20);
        seen = await statuses();
      }
      await server.stop('SIGKILL');
      server = await start();
      // The second once the restarted process has finished some of it.
      const resumed = Date.now() + LEASE_MS + 20_000;
      for (seen = await statuses(); !seen.includes('succeeded'); seen = await statuses()) {
        assert.ok(Date.now() < resumed, `the restarted process finished nothing: ${seen.join(',')}`);
        await sleep(20);
      }
      await server.stop('SIGKILL');
      server = await start();

      // The embedded database's new process gives back the killed one's leases at start; on a shared
      // server they run out after LEASE_MS (another live process may still hold them), then the work finishes.
      const deadline = Date.now() + LEASE_MS + 20_000;
      for (;;) {
        const open = await api<{ data: unknown[] }>('GET', '/customers?status=provisioning');
        assert.equal(open.status, 200, open.text);
        if (open.body.data.length === 0) break;
        assert.ok(Date.now() < deadline, `customers still provisioning: ${open.text}`);
        await sleep(100);
      }
      const active = await api<{ data: { id: string }[] }>('GET', '/customers?status=active&limit=200');
      assert.equal(active.body.data.length, CUSTOMERS, 'every customer became active');
      await server.stop('SIGTERM');
      serve = undefined;

      const database = await target.open(env);
      try {
        const db = database.db;
        const open = await db.selectFrom('operations').select('id').where('status', 'in', ['pending', 'running']).execute();
        assert.deepEqual(open, [], 'no operation left open');
        const ops = await db.selectFrom('operations').select(['customer_id', 'status']).execute();
        assert.equal(ops.length, CUSTOMERS);
        assert.ok(ops.every((o) => o.status === 'succeeded'));
        const events = await db.selectFrom('events').select(['type', 'data']).where('partner_id', '=', 'survivor').execute();
        assert.equal(events.length, CUSTOMERS, 'one event per finished operation, none lost, none twice');
        const perCustomer = new Map<string, number>();
        for (const e of events) {
          assert.equal(e.type, 'customer.ready');
          const id = (e.data as { customer_id: string }).customer_id;
          perCustomer.set(id, (perCustomer.get(id) ?? 0) + 1);
        }
        assert.equal(perCustomer.size, CUSTOMERS);
        assert.ok([...perCustomer.values()].every((n) => n === 1));
      } finally {
        await database.close();
      }
    });
  });
}
