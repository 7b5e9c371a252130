import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openAppDatabase } from '../src/app/database.ts';
import { http, OPERATOR_API, PARTNER_API } from './client.ts';
import { createServerDatabase, dropServerDatabase, SERVER_DATABASE_URL } from './harness.ts';
import { type ServeProcess, spawnServe } from './serve-process.ts';
import { TEST_CA_FILE, verifyDelivery, WebhookReceiver } from './webhook-receiver.ts';

/**
 * Webhook delivery across crashes and processes, with `tenantry serve` as real processes and a real
 * HTTPS receiver: a kill -9 during a burst of 1,000 events loses none, and two processes on one
 * PostgreSQL deliver each event once.
 */
const OPERATOR_TOKEN = randomBytes(24).toString('hex');
const CUSTOMERS = 10;
const EVENTS = 1_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Target {
  name: string;
  env(): Promise<Record<string, string>>;
  cleanup(env: Record<string, string>): Promise<void>;
}

const targets: Target[] = [
  {
    name: 'embedded',
    env: async () => ({ TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-hooks-')) }),
    cleanup: async () => {},
  },
];
if (SERVER_DATABASE_URL) {
  targets.push({
    name: 'postgres',
    env: async () => ({
      TENANTRY_DATABASE_URL: await createServerDatabase(),
      TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-hooks-')),
    }),
    cleanup: (env) => dropServerDatabase(env.TENANTRY_DATABASE_URL ?? ''),
  });
}

const serveEnv = (env: Record<string, string>) => ({
  ...env,
  TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN,
  TENANTRY_SANDBOX_DELAY_MS: '0',
  TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE,
});

/** A partner allowed private receivers, its token, customers and a webhook to `receiver`; the secret. */
async function setUpPartner(server: ServeProcess, receiver: WebhookReceiver, customers: number) {
  const operator = (method: string, path: string, body?: unknown) =>
    http<{ data: Record<string, string> }>(server.operatorUrl, method, `${OPERATOR_API}${path}`, { token: OPERATOR_TOKEN, body });
  const created = await operator('POST', '/partners', {
    id: 'burst',
    display_name: 'Burst',
    allow_private_webhooks: true,
    limits: { rate_limit_per_minute: 1_000_000, rate_limit_burst: 100_000, max_open_operations: 100 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const key = (await operator('POST', '/partners/burst/keys', {})).body.data.key ?? '';
  let token = '';
  for (let i = 0; i < 50 && !token; i++) {
    const exchanged = await http<{ access_token?: string }>(server.partnerUrl, 'POST', `${PARTNER_API}/auth/token`, {
      body: { api_key: key },
    });
    token = exchanged.body.access_token ?? '';
    if (!token) await sleep(100);
  }
  assert.ok(token);
  const hook = await http<{ data: { signing_secret: string } }>(server.partnerUrl, 'PUT', `${PARTNER_API}/webhook`, {
    token,
    body: { url: receiver.url() },
  });
  assert.equal(hook.status, 200, hook.text);
  for (let i = 0; i < customers; i++) {
    const c = await http(server.partnerUrl, 'POST', `${PARTNER_API}/customers`, {
      token,
      body: { id: `b${i}`, owner: { username: 'o', email: `o@b${i}.example` } },
    });
    assert.equal(c.status, 202, c.text);
  }
  return { token, secret: hook.body.data.signing_secret };
}

/** Every event id of the partner, walking GET /events. */
async function allEventIds(partnerUrl: string, token: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { body: { data: { id: string }[]; pagination: { next_cursor: string | null } } } = await http(
      partnerUrl,
      'GET',
      `${PARTNER_API}/events?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { token },
    );
    ids.push(...page.body.data.map((e) => e.id));
    cursor = page.body.pagination.next_cursor;
  } while (cursor);
  return ids;
}

/**
 * Suspends and resumes customer `id` (one event each) until `progress.done` reaches `progress.target`,
 * riding out the server going away: after a restart it re-reads which call comes next.
 */
async function churn(url: () => string, token: string, id: string, progress: { done: number; target: number }) {
  let suspended = false;
  while (progress.done < progress.target) {
    try {
      const result = await http(url(), 'POST', `${PARTNER_API}/customers/${id}/${suspended ? 'resume' : 'suspend'}`, { token, body: {} });
      if (result.status === 200) {
        progress.done++;
        suspended = !suspended;
      } else {
        const read = await http<{ data: { status: string } }>(url(), 'GET', `${PARTNER_API}/customers/${id}`, { token });
        suspended = read.body.data.status === 'suspended';
      }
    } catch {
      await sleep(50); // the process is down: wait for the restart
    }
  }
}

/**
 * The partner's deliveries that no outcome has closed yet, read once every process has stopped:
 * a delivery still pending would be sent (again) by the next process, so none may be left.
 */
async function pendingDeliveries(env: Record<string, string>): Promise<string[]> {
  const database = await openAppDatabase(
    env.TENANTRY_DATABASE_URL
      ? { kind: 'postgres', url: env.TENANTRY_DATABASE_URL }
      : { kind: 'embedded', dataDir: join(env.TENANTRY_DATA_DIR ?? '', 'db') },
  );
  try {
    const rows = await database.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('partner_id', '=', 'burst')
      .where('state', '=', 'pending')
      .execute();
    return rows.map((row) => row.id);
  } finally {
    await database.close();
  }
}

/** Waits until the partner's customers are active (suspend needs it). */
async function customersActive(partnerUrl: string, token: string) {
  for (let i = 0; i < 200; i++) {
    const active = await http<{ data: unknown[] }>(partnerUrl, 'GET', `${PARTNER_API}/customers?status=active&limit=200`, { token });
    if (active.body.data.length === CUSTOMERS) return;
    await sleep(50);
  }
  assert.fail('customers did not become active');
}

for (const target of targets) {
  describe(`webhook delivery through kill -9 [${target.name}]`, () => {
    let env: Record<string, string> = {};
    let server: ServeProcess | undefined;
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await new WebhookReceiver().listen();
    });
    after(async () => {
      await server?.stop('SIGKILL');
      await receiver.close();
      await target.cleanup(env);
    });

    test(`a kill -9 during a burst of ${EVENTS} events loses none; pending deliveries resume with their ids`, async () => {
      env = await target.env();
      server = await spawnServe(serveEnv(env), { keepOutput: false });
      const { token, secret } = await setUpPartner(server, receiver, CUSTOMERS);
      await customersActive(server.partnerUrl, token);
      const current = () => server?.partnerUrl ?? '';
      const progress = { done: 0, target: EVENTS };
      const churners = Promise.all(Array.from({ length: CUSTOMERS }, (_, i) => churn(current, token, `b${i}`, progress)));
      // Kill once deliveries are flowing, mid-burst.
      while (receiver.deliveries.length < 300) await sleep(10);
      assert.ok(progress.done < EVENTS * 0.8, 'the kill lands mid-burst');
      await server.stop('SIGKILL');
      const beforeRestart = new Set(receiver.ids());
      server = await spawnServe(serveEnv(env), { keepOutput: false });
      await churners;

      const ids = await allEventIds(server.partnerUrl, token);
      assert.ok(ids.length >= EVENTS, `${ids.length} events recorded`);
      const deadline = Date.now() + 60_000;
      for (;;) {
        const got = new Set(receiver.ids());
        const missing = ids.filter((id) => !got.has(id));
        if (missing.length === 0) break;
        assert.ok(Date.now() < deadline, `${missing.length} of ${ids.length} events never delivered`);
        await sleep(100);
      }
      // A delivery the killed process sent but did not record stays under its lease (15 s) until the new
      // process sends it again: on PostgreSQL, wait for that while the server runs (the embedded database
      // is the server's alone until it stops).
      if (env.TENANTRY_DATABASE_URL) {
        const settled = Date.now() + 60_000;
        while ((await pendingDeliveries(env)).length > 0) {
          assert.ok(Date.now() < settled, "the killed process's deliveries are sent again once their lease ends");
          await sleep(500);
        }
      }
      // A stop lets the deliveries in flight finish and records them: after it nothing more can arrive,
      // so the counts below are final, and nothing left pending would be sent by a later process.
      assert.equal(await server.stop('SIGTERM'), 0);
      server = undefined;
      assert.deepEqual(await pendingDeliveries(env), [], 'every delivery has its outcome');
      for (const delivery of receiver.deliveries) assert.equal(verifyDelivery(delivery, [secret], Date.now()), secret);
      // At least once: only what was in flight at the kill may arrive twice.
      const counts = new Map<string, number>();
      for (const id of receiver.ids()) counts.set(id, (counts.get(id) ?? 0) + 1);
      const twice = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
      assert.ok(twice.length <= 64, `${twice.length} duplicates`);
      assert.ok(
        twice.every((id) => beforeRestart.has(id)),
        'a duplicate is a delivery the killed process had sent',
      );
      console.log(
        `# ${target.name}: ${ids.length} events, ${receiver.deliveries.length} deliveries, ${twice.length} duplicated by the kill`,
      );
    });
  });
}

if (SERVER_DATABASE_URL) {
  describe('two processes on one PostgreSQL', () => {
    let env: Record<string, string> = {};
    const servers: ServeProcess[] = [];
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await new WebhookReceiver().listen();
      env = { TENANTRY_DATABASE_URL: await createServerDatabase(), TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-hooks-')) };
    });
    after(async () => {
      await Promise.all(servers.map((s) => s.stop('SIGKILL')));
      await receiver.close();
      await dropServerDatabase(env.TENANTRY_DATABASE_URL ?? '');
    });

    test('deliver each event exactly once between them', async () => {
      servers.push(await spawnServe(serveEnv(env), { keepOutput: false }));
      const { token } = await setUpPartner(servers[0] as ServeProcess, receiver, CUSTOMERS);
      servers.push(await spawnServe(serveEnv(env), { keepOutput: false }));
      await customersActive((servers[0] as ServeProcess).partnerUrl, token);
      const progress = { done: 0, target: 400 };
      await Promise.all(
        Array.from({ length: CUSTOMERS }, (_, i) => churn(() => (servers[i % 2] as ServeProcess).partnerUrl, token, `b${i}`, progress)),
      );
      const ids = await allEventIds((servers[1] as ServeProcess).partnerUrl, token);
      assert.ok(ids.length >= 400);
      const deadline = Date.now() + 30_000;
      while (new Set(receiver.ids()).size < ids.length) {
        assert.ok(Date.now() < deadline, 'every event delivered');
        await sleep(50);
      }
      // Both stop, each letting its deliveries in flight finish: after that nothing more can arrive, and
      // nothing left pending would be sent by a later process.
      assert.deepEqual(await Promise.all(servers.splice(0).map((s) => s.stop('SIGTERM'))), [0, 0]);
      assert.deepEqual(await pendingDeliveries(env), [], 'every delivery has its outcome');
      assert.equal(receiver.deliveries.length, ids.length, 'no event delivered twice');
      assert.deepEqual(new Set(receiver.ids()), new Set(ids));
    });
  });
}
