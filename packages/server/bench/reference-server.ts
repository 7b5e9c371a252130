import { createServer } from 'node:http';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from '../src/app/database.ts';
import { customerPlanId } from '../src/capacity/customer-quotas.ts';
import { customerWithProjectsQuery } from '../src/customers/store.ts';
import { PGlitePool } from '../src/infra/db/pglite-pool.ts';
import { newId } from '../src/infra/ids.ts';

/**
 * The floors of the bench, in their own process on the same Node as `tenantry serve`:
 *
 *   GET /bare            node:http alone: a JSON body like whoami's envelope, no framework, no log line
 *   GET /bare-whoami     node:http writing what whoami must: its headers (a request id minted as the server
 *                        mints them, cache-control, the two rate-limit headers) and a body of its shape and
 *                        size serialised per request; no token, no rate limit, no log line
 *   GET /customers/{id}  node:http and one SELECT: the very statement `GET /customers/{id}` runs (customer,
 *                        its plan and its projects as JSON, compiled once by the same query builder), sent through the
 *                        same driver (pg.Pool with the server's pool size, the statement prepared once per
 *                        connection as the server's are; or PGlite) to the same database,
 *                        answered as the same envelope. No authentication, no rate limit, no validation.
 *
 * Argument: a postgres:// URL, or the embedded database's directory (the server must be stopped: one process
 * owns an embedded database). Prints `{"url": ...}` once listening.
 */
const target = process.argv[2] ?? '';
const partnerId = process.argv[3] ?? 'bench';

interface Driver {
  query(text: string, params: readonly unknown[]): Promise<{ rows: unknown[] }>;
  end(): Promise<void>;
}

async function driver(): Promise<Driver> {
  if (target.startsWith('postgres')) {
    const pool = new pg.Pool({ connectionString: target, max: 10 });
    // A named statement, parsed once per connection, as the server's statements are.
    return { query: (text, params) => pool.query({ name: 'floor', text, values: [...params] }), end: () => pool.end() };
  }
  const pool = await PGlitePool.open(target);
  return {
    query: async (text, params) => {
      const client = await pool.connect();
      try {
        return await client.query(text, params);
      } finally {
        client.release();
      }
    },
    end: () => pool.end(),
  };
}

// The statement, compiled once by the query builder the product uses (a Kysely that never connects).
const compiler = new Kysely<Database>({ dialect: new PostgresDialect({ pool: {} as pg.Pool }) });
const compiled = customerWithProjectsQuery(compiler, customerPlanId, { partnerId, mode: 'live' }, '$ID').compile();

const db = await driver();
const bare = Buffer.from(JSON.stringify({ status: 'success', data: { ok: true } }));
const PREFIX = '/customers/';
/** whoami's answer as a partner gets it (its shape and size; the values are made up). */
const WHOAMI = {
  partner: { id: 'bench', display_name: 'Bench' },
  scopes: ['customers:read', 'customers:write', 'customers:sso', 'usage:read'],
  limits: {
    max_customers: 0,
    max_usage_window_days: 93,
    max_projects_per_customer: 10,
    max_open_operations: 10000,
    rate_limit_per_minute: 10000000,
    rate_limit_burst: 1000000,
  },
  customer_count: 1,
  defaults: { plan_id: 'standard', grace_days: 14 },
  token: { expires_at: '2026-11-26T11:36:17.000Z', kid: '2ucueokgkl6u', mode: 'live' },
};
let remaining = 1_000_000;

const server = createServer((request, response) => {
  const url = request.url ?? '';
  if (url === '/bare') {
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': bare.length }).end(bare);
    return;
  }
  if (url === '/bare-whoami') {
    const body = JSON.stringify({ status: 'success', data: WHOAMI });
    remaining = remaining > 0 ? remaining - 1 : 1_000_000;
    response.writeHead(200, [
      'x-request-id',
      newId('request'),
      'cache-control',
      'no-store',
      'x-ratelimit-limit',
      '10000000',
      'x-ratelimit-remaining',
      String(remaining),
      'content-type',
      'application/json; charset=utf-8',
      'content-length',
      String(Buffer.byteLength(body)),
    ]);
    response.end(body);
    return;
  }
  if (url.startsWith(PREFIX)) {
    const id = decodeURIComponent(url.slice(PREFIX.length));
    const params = compiled.parameters.map((p) => (p === '$ID' ? id : p));
    db.query(compiled.sql, params).then(
      ({ rows }) => {
        if (rows.length === 0) {
          response.writeHead(404).end();
          return;
        }
        const body = JSON.stringify({ status: 'success', data: rows[0] });
        response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
      },
      () => response.writeHead(500).end(),
    );
    return;
  }
  response.writeHead(404).end();
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${address.port}` })}\n`);
});
process.on('SIGTERM', () => server.close(() => db.end().then(() => process.exit(0))));
