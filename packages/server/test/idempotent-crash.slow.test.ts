import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { type HttpResult, http, OPERATOR_API, PARTNER_API } from './client.ts';
import { createServerDatabase, dropServerDatabase, SERVER_DATABASE_URL } from './harness.ts';
import { type ServeProcess, spawnServe } from './serve-process.ts';

/**
 * An idempotent burst cut by a crash (kill -9 of the server, or its database connections terminated):
 * every retry with a key answers exactly what the first completed attempt with that key answered,
 * and a customer exists exactly when some attempt answered 202 for it. Runs `tenantry serve` as a
 * real process on both databases.
 */
const BURST = 120;
const OPERATOR_TOKEN = randomBytes(24).toString('hex');

interface Target {
  name: string;
  env(): Promise<Record<string, string>>;
  cleanup(env: Record<string, string>): Promise<void>;
}

const targets: Target[] = [
  {
    name: 'embedded',
    env: async () => ({ TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-idem-crash-')) }),
    cleanup: async () => {},
  },
];
if (SERVER_DATABASE_URL) {
  targets.push({
    name: 'postgres',
    env: async () => ({
      TENANTRY_DATABASE_URL: await createServerDatabase(),
      TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-idem-crash-')),
    }),
    cleanup: (env) => dropServerDatabase(env.TENANTRY_DATABASE_URL ?? ''),
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An answer as a retry must repeat it: status and body, byte for byte. */
const answerOf = (result: HttpResult) => `${result.status} ${result.text}`;

/** Whether an answer is one a client must retry with the same key (nothing is settled by it). */
function unsettled(result: HttpResult | undefined): boolean {
  if (!result) return true;
  const code = (result.body as { error?: { code?: string } } | undefined)?.error?.code;
  return result.status >= 500 || code === 'IDEMPOTENCY_KEY_IN_PROGRESS' || code === 'RATE_LIMITED';
}

for (const target of targets) {
  describe(`an idempotent burst cut by a crash [${target.name}]`, () => {
    const envs: Record<string, string>[] = [];
    const servers: ServeProcess[] = [];
    after(async () => {
      for (const server of servers) await server.stop('SIGKILL');
      for (const env of envs) await target.cleanup(env);
    });

    const start = async (env: Record<string, string>) => {
      const server = await spawnServe(
        { ...env, TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN, TENANTRY_SANDBOX_DELAY_MS: '0' },
        { keepOutput: false },
      );
      servers.push(server);
      return server;
    };

    /** A partner with room for the burst and a key; answers a function that gets a fresh token from `server`. */
    const newPartner = async (server: ServeProcess, id: string) => {
      const operator = (method: string, path: string, body?: unknown) =>
        http<{ data: Record<string, string> }>(server.operatorUrl, method, `${OPERATOR_API}${path}`, { token: OPERATOR_TOKEN, body });
      const created = await operator('POST', '/partners', {
        id,
        display_name: id,
        limits: { max_customers: 0, max_open_operations: 1000, rate_limit_per_minute: 1_000_000, rate_limit_burst: 100_000 },
      });
      assert.equal(created.status, 201, created.text);
      const key = (await operator('POST', `/partners/${id}/keys`, {})).body.data.key ?? '';
      return async (at: ServeProcess) => {
        for (let i = 0; i < 100; i++) {
          const exchanged = await http<{ access_token?: string }>(at.partnerUrl, 'POST', `${PARTNER_API}/auth/token`, {
            body: { api_key: key },
          });
          if (exchanged.body.access_token) return exchanged.body.access_token;
          await sleep(100);
        }
        throw new Error('no token');
      };
    };

    const createWithKey = (server: ServeProcess, token: string, i: number) =>
      http(server.partnerUrl, 'POST', `${PARTNER_API}/customers`, {
        token,
        headers: { 'idempotency-key': `burst-${i}` },
        body: { id: `c${i}`, owner: { username: 'owner', email: `owner@c${i}.example` } },
      });

    /**
     * Retries every key until each answers something settled, then once more: both answers must be the
     * same, and the same as any settled answer the burst itself got. A 202 means the customer exists.
     */
    const checkRetries = async (server: ServeProcess, token: () => Promise<string>, first: (HttpResult | undefined)[]) => {
      let bearer = await token();
      const settled: HttpResult[] = [];
      // Keys whose first request died unanswered stay running until their lease ends (60 s) on a
      // database other processes may share; on the embedded one the restart gives them back at once.
      const deadline = Date.now() + 90_000;
      for (let i = 0; i < BURST; i++) {
        for (;;) {
          const answer = await createWithKey(server, bearer, i);
          if (answer.status === 401) {
            bearer = await token();
            continue;
          }
          if (!unsettled(answer)) {
            settled[i] = answer;
            break;
          }
          assert.ok(Date.now() < deadline, `key burst-${i} still unsettled: ${answer.text}`);
          await sleep(250);
        }
      }
      const customers = await http<{ data: { id: string }[] }>(server.partnerUrl, 'GET', `${PARTNER_API}/customers?limit=200`, {
        token: bearer,
      });
      const existing = new Set(customers.body.data.map((c) => c.id));
      for (let i = 0; i < BURST; i++) {
        const retry = settled[i] as HttpResult;
        const again = await createWithKey(server, bearer, i);
        assert.equal(answerOf(again), answerOf(retry), `key burst-${i}: a second retry answers as the first`);
        const original = first[i];
        if (!unsettled(original)) {
          assert.equal(answerOf(retry), answerOf(original as HttpResult), `key burst-${i}: the retry answers what the burst answered`);
        }
        const code = (retry.body as { error?: { code?: string } }).error?.code;
        assert.notEqual(code, 'ALREADY_EXISTS', `key burst-${i}: its own customer is not taken for another's: ${retry.text}`);
        assert.equal(retry.status, 202, `key burst-${i}: ${retry.text}`);
        assert.ok(existing.has(`c${i}`), `customer c${i} exists`);
      }
      assert.equal(existing.size, BURST, 'one customer a key, no more');
    };

    // The window between a commit and its answer is short: several kills give the crash more chances to
    // land in it. On a shared database each kill costs the keys' 60 s lease; on the embedded one nothing.
    const kills = target.name === 'embedded' ? 3 : 1;
    test(`kill -9 in the middle of the burst, ${kills} times: every retry answers what the first completed attempt did`, async () => {
      const env = await target.env();
      envs.push(env);
      let server = await start(env);
      for (let round = 0; round < kills; round++) {
        const token = await newPartner(server, `crash-kill-${round}`);
        const bearer = await token(server);
        const first: (HttpResult | undefined)[] = new Array(BURST);
        let answered = 0;
        const quarter = Promise.withResolvers<void>();
        const burst = Array.from({ length: BURST }, (_, i) =>
          createWithKey(server, bearer, i).then(
            (result) => {
              first[i] = result;
              if (++answered === BURST / 4) quarter.resolve();
            },
            () => {},
          ),
        );
        // The kill lands while the burst is in flight: some answered, some committed unanswered, some not begun.
        await Promise.race([quarter.promise, Promise.all(burst)]);
        assert.ok(answered < BURST, 'the kill lands before the burst ends');
        await server.stop('SIGKILL');
        await Promise.all(burst);
        server = await start(env);
        await checkRetries(server, () => token(server), first);
      }
    });

    if (target.name === 'postgres') {
      test('database connections terminated during the burst: every retry answers what the first completed attempt did', async () => {
        const env = await target.env();
        envs.push(env);
        const server = await start(env);
        const token = await newPartner(server, 'crash-term');
        const bearer = await token(server);
        const admin = new pg.Client({ connectionString: env.TENANTRY_DATABASE_URL });
        await admin.connect();
        try {
          const first: (HttpResult | undefined)[] = new Array(BURST);
          let done = false;
          const burst = Promise.all(
            Array.from({ length: BURST }, (_, i) =>
              createWithKey(server, bearer, i).then((result) => {
                first[i] = result;
              }),
            ),
          ).finally(() => {
            done = true;
          });
          let terminated = 0;
          while (!done) {
            const killed = await admin.query(
              'select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
            );
            terminated += Number(killed.rows[0]?.n ?? 0);
            await sleep(15);
          }
          await burst;
          assert.ok(terminated > 0, 'backends were terminated during the burst');
          assert.ok(
            first.some((result) => result?.status === 503),
            'some requests of the burst met a terminated connection',
          );
          for (const result of first) {
            if (result && result.status >= 500) {
              assert.equal(result.status, 503, result.text);
              assert.equal((result.body as { error?: { code?: string } }).error?.code, 'UNAVAILABLE', result.text);
            }
          }
          await checkRetries(server, () => token(server), first);
        } finally {
          await admin.end();
        }
      });
    }
  });
}
