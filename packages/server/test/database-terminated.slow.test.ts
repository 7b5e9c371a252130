import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { FastifyPluginAsync } from 'fastify';
import { sql } from 'kysely';
import pg from 'pg';
import { openAppDatabase } from '../src/app/database.ts';
import type { Services } from '../src/app/services.ts';
import { IDEMPOTENCY_LEASE_MS } from '../src/infra/idempotency/store.ts';
import { OPERATOR_API, PARTNER_API, partnerWithToken } from './client.ts';
import { checkContract } from './contract.ts';
import { fixtureRoutes } from './fixtures.ts';
import {
  createServerDatabase,
  dropServerDatabase,
  SERVER_DATABASE_URL,
  startTestServer,
  type TestDatabase,
  type TestServer,
} from './harness.ts';
import { customerBody } from './provisioning.ts';

/** What PostgreSQL says to a session `pg_terminate_backend` ends: it belongs in the log, never in an answer. */
const DATABASE_WORDS =
  /terminating connection|administrator command|57P01|53300|too many connections|Connection terminated|not queryable|statusCode/i;
const ROUNDS = 25;
const UNAVAILABLE_MESSAGE = 'The service is temporarily unavailable. Retry later.';

/**
 * PostgreSQL's sessions of the server ended again and again (`pg_terminate_backend`, what a failover
 * or an administrator does) while requests of every kind are in flight: every answer is a success or
 * the envelope's 503 UNAVAILABLE with Retry-After, whichever hook or handler met the lost session.
 * The server connects as a role of its own, not a superuser, so its new sessions can be refused too
 * (`connection limit 0`, which PostgreSQL answers with 53300).
 */
describe('PostgreSQL sessions terminated during requests', {
  skip: SERVER_DATABASE_URL ? false : 'TENANTRY_TEST_DATABASE_URL is not set',
}, () => {
  const role = `tenantry_r_${randomBytes(6).toString('hex')}`;
  const gated = gatedRoute();
  let server: TestServer;
  let admin: pg.Client;
  let token: string;
  let key: string;
  before(async () => {
    server = await startTestServer(ownRole(role), { partnerRoutes: [fixtureRoutes().routes, gated.routes] });
    ({ token, key } = await partnerWithToken(server, 'terminated', {
      settings: { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 100_000, max_open_operations: 10_000 } },
    }));
    admin = new pg.Client({ connectionString: asAdministrator(server.databaseUrl as string) });
    await admin.connect();
  });
  after(async () => {
    await admin?.end();
    await server?.stop();
  });

  const terminateAll = async (): Promise<number> => {
    const { rows } = await admin.query<{ ended: boolean }>(
      'select pg_terminate_backend(pid) as ended from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    return rows.filter((row) => row.ended).length;
  };
  /** Whether the database accepts new sessions of the server's role. */
  const sessionsAllowed = (allowed: boolean) => admin.query(`alter role ${role} connection limit ${allowed ? -1 : 0}`);

  /** One request, its answer kept as sent: the contract is checked after this test's own, clearer checks. */
  const ask = async (
    base: string,
    method: string,
    path: string,
    options: { token: string; body?: unknown; key?: string },
  ): Promise<Answer> => {
    const headers: Record<string, string> = { authorization: `Bearer ${options.token}` };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.key !== undefined) headers['idempotency-key'] = options.key;
    const url = `${base}${path}`;
    const response = await fetch(url, { method, headers, ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}) });
    return { method, url, status: response.status, headers: response.headers, text: await response.text() };
  };

  const exchange = async (apiKey: string): Promise<Answer> => {
    const url = `${server.partnerUrl}${PARTNER_API}/auth/token`;
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: apiKey }),
    });
    return { method: 'POST', url, status: response.status, headers: response.headers, text: await response.text() };
  };

  test('every answer is a success or 503 UNAVAILABLE in the envelope with Retry-After, never the database’s words', async () => {
    let n = 0;
    const partner = (method: string, path: string, body?: unknown) =>
      ask(server.partnerUrl, method, `${PARTNER_API}${path}`, { token, body, ...(method === 'POST' ? { key: `key-${n++}` } : {}) });
    const operator = (path: string) => ask(server.operatorUrl, 'GET', `${OPERATOR_API}${path}`, { token: server.operatorToken });
    const requests: (() => Promise<Answer>)[] = [
      () => partner('POST', '/test-fixtures/effects', { name: `effect-${n}` }),
      () => partner('POST', '/customers', customerBody(`cus-${n}`)),
      () => partner('GET', '/customers?limit=5'),
      () => partner('GET', '/test-fixtures/items?limit=5'),
      () => operator('/partners?limit=5'),
      () => operator('/audit?limit=5'),
      () => exchange(key),
    ];
    const answers: { what: string; answer: Answer }[] = [];
    let ended = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // Two of each kind at once, the server's sessions ended again and again until all have answered.
      let answered = false;
      const batch = Promise.all(
        [...requests, ...requests].map(async (send, i) => {
          answers.push({ what: `round ${round}, request ${i}`, answer: await send() });
        }),
      ).finally(() => {
        answered = true;
      });
      while (!answered) ended += await terminateAll();
      await batch;
      // The token endpoint allows a key 30 exchanges a minute (burst 10): the next round's two are due.
      server.clock.advance(4_000);
    }

    assert.ok(ended > ROUNDS, `sessions were ended (${ended})`);
    assert.ok(
      answers.some(({ answer }) => answer.status === 503),
      'some requests met an ended session',
    );
    for (const { what, answer } of answers) {
      const said = `${what}: ${answer.method} ${answer.url} → ${answer.status} ${answer.text}`;
      assert.doesNotMatch(answer.text, DATABASE_WORDS, said);
      const body = JSON.parse(answer.text) as { status?: string; error?: { code?: string; message?: string; request_id?: string } };
      if (answer.status >= 300) {
        assert.equal(answer.status, 503, said);
        assert.equal(body.status, 'error', said);
        assert.equal(body.error?.code, 'UNAVAILABLE', said);
        assert.equal(body.error?.message, 'The service is temporarily unavailable. Retry later.', said);
        assert.equal(body.error?.request_id, answer.headers.get('x-request-id'), said);
        assert.equal(answer.headers.get('retry-after'), '5', `${said}: Retry-After`);
      }
      checkContract(answer.method, answer.url, answer.status, answer.headers, body);
    }
    assert.match(server.rawLogs(), /terminating connection due to administrator command/, 'the database’s words are in the log');
  });

  test("a mutating request whose handler, then its key's release, lose the database answers 503 UNAVAILABLE; the key is free once its lease ends", async () => {
    let idempotencyKey = '';
    const send = () => ask(server.partnerUrl, 'POST', `${PARTNER_API}/test-fixtures/after-gate`, { token, body: {}, key: idempotencyKey });
    let first: Promise<Answer> | undefined;
    // The sessions the test before ended may still be in the server's pool: a request they fail before
    // its handler is sent again, with a new key.
    for (let attempt = 0; first === undefined; attempt++) {
      assert.ok(attempt < 20, 'a request reaches the handler');
      idempotencyKey = `lost-twice-${attempt}`;
      const sent = send();
      if ((await Promise.race([gated.reached.then(() => 'reached'), sent])) === 'reached') first = sent;
    }
    // From here on the server's sessions are ended and new ones refused: the handler's query fails, and so
    // does the release of its Idempotency-Key that follows the error handler's answer.
    await sessionsAllowed(false);
    await terminateAll();
    gated.open();
    const lost = await first;
    const said = `${lost.status} ${lost.text}`;
    assert.doesNotMatch(lost.text, DATABASE_WORDS, said);
    assert.equal(lost.status, 503, said);
    const body = JSON.parse(lost.text) as { status: string; error: { code: string; message: string; request_id: string } };
    assert.equal(body.status, 'error', said);
    assert.equal(body.error.code, 'UNAVAILABLE', said);
    assert.equal(body.error.message, UNAVAILABLE_MESSAGE, said);
    assert.equal(body.error.request_id, lost.headers.get('x-request-id'));
    assert.equal(lost.headers.get('retry-after'), '5');
    assert.match(server.rawLogs(), /too many connections for role|terminating connection|Connection terminated/, 'why is in the log');

    await sessionsAllowed(true);
    // The key was not released: its lease holds it, then lets the retry run.
    const held = await send();
    assert.equal(held.status, 409, held.text);
    assert.equal((JSON.parse(held.text) as { error: { code: string } }).error.code, 'IDEMPOTENCY_KEY_IN_PROGRESS');
    server.clock.advance(IDEMPOTENCY_LEASE_MS + 1_000);
    const retried = await send();
    assert.equal(retried.status, 200, retried.text);
  });
});

/** The administrator's credentials (the test server's URL's) on `url`'s database. */
function asAdministrator(url: string): string {
  const administrator = new URL(SERVER_DATABASE_URL as string);
  const on = new URL(url);
  on.username = administrator.username;
  on.password = administrator.password;
  return on.toString();
}

/** A fresh database on the PostgreSQL test server, owned by `role` (made here, not a superuser), which the server connects as. */
function ownRole(role: string): TestDatabase {
  const administer = async (statement: string) => {
    const client = new pg.Client({ connectionString: SERVER_DATABASE_URL });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  return {
    name: 'postgres',
    create: async () => {
      await administer(`create role ${role} login`);
      const url = await createServerDatabase();
      const database = new URL(url).pathname.slice(1);
      await administer(`alter database ${database} owner to ${role}`);
      const asRole = new URL(url);
      asRole.username = role;
      asRole.password = '';
      const handle = await openAppDatabase({ kind: 'postgres', url: asRole.toString() });
      return {
        handle,
        url: asRole.toString(),
        drop: async () => {
          await handle.close();
          await dropServerDatabase(url);
          await administer(`drop role if exists ${role}`);
        },
      };
    },
  };
}

/** `POST /test-fixtures/after-gate`: past authentication and its Idempotency-Key's claim, waits for `open()`, then queries the database. */
function gatedRoute() {
  let reached: () => void = () => {};
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const control = {
    reached: new Promise<void>((resolve) => {
      reached = resolve;
    }),
    open: () => open(),
    routes: (async (app, { services }) => {
      app.post('/test-fixtures/after-gate', { config: { scope: 'customers:write' } }, async () => {
        reached();
        await gate;
        await sql`select 1`.execute(services.options.database.db);
        return { status: 'success', data: {} };
      });
    }) as FastifyPluginAsync<{ services: Services }>,
  };
  return control;
}

interface Answer {
  method: string;
  url: string;
  status: number;
  headers: Headers;
  text: string;
}
