/**
 * `npm run bench`: throughput and latency of the hot paths, on the embedded
 * database and on PostgreSQL, against a bare route of the same framework.
 *
 *   (a) GET /bare              a Fastify route with no auth and no database
 *   (b) GET /auth/whoami       token check, partner lookup, rate limit, response
 *   (c) POST /auth/token       key lookup, constant-time hash check, token signing
 *   (d) GET /customers/{id}    a single read: token, rate limit, two indexed reads
 *   (e) 1,000 concurrent POST /customers on the sandbox (delay 0): creates
 *       accepted per second, and operations completed per second
 *   (f) GET /customers?limit=200 with 100,000 customers: the first page and a
 *       page 90% deep (goal: within 1.5x of the first)
 *   (g) webhooks (bench/webhooks.ts): deliveries per second to an HTTPS receiver,
 *       and delivery lag p50/p99 at 200 events per second (goal: p99 under 1 s)
 *   (h) quotas (bench/quotas.ts): PUT /customers/{id}/quota per second for one
 *       partner (serialised by its capacity lock) and across 50 partners
 *   (i) sdk (bench/sdk.ts): what @tenantry/sdk adds on the caller's side to a
 *       GET /customers/{id}, against a bare fetch (PGlite)
 *   (j) images (bench/os-images.ts): GET /api/create-vm/{ns}/os-images from the
 *       cache against a bare node:http route answering the same bytes (goal: 0.8)
 *
 * BENCH_ONLY=api, webhooks, quotas, sdk or images runs one part.
 * The server runs in its own process (as `tenantry serve`); the load comes
 * from this one, over loopback. Set TENANTRY_BENCH_DATABASE_URL to choose the
 * PostgreSQL server (default: the local test database, skipped if unreachable).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import pg from 'pg';
import { spawnServe } from '../test/serve-process.ts';
import {
  CONNECTIONS,
  DURATION_S,
  load,
  OPERATOR_TOKEN,
  openServerDatabase,
  operator,
  partnerToken,
  type Result,
  ROUNDS,
} from './common.ts';
import { benchImages } from './os-images.ts';
import { benchQuotas } from './quotas.ts';
import { benchSdk } from './sdk.ts';
import { benchWebhooks } from './webhooks.ts';

const POSTGRES_URL = process.env.TENANTRY_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface Notes {
  lines: string[];
}

async function benchDatabase(label: string, env: Record<string, string>, notes: Notes): Promise<Result[]> {
  // Logging stays at info, as in production: one JSON line per request is part of the cost.
  const serveEnv = { ...env, TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN, TENANTRY_SANDBOX_DELAY_MS: '0' };
  let server = await spawnServe(serveEnv, { keepOutput: false });
  try {
    await operator(server, 'POST', '/partners', {
      id: 'bench',
      display_name: 'Bench',
      limits: { max_customers: 0, max_open_operations: 10_000, rate_limit_per_minute: 10_000_000, rate_limit_burst: 1_000_000 },
    });
    // The default pool holds 500 standard customers; (e) and (f) need more.
    await operator(server, 'PUT', '/partners/bench/capacity', {
      pool: { vcpu: 1_000_000, memory_gib: 4_000_000, storage_gib: 50_000_000 },
    });
    const first = String((await operator(server, 'POST', '/partners/bench/keys', {})).key);
    let token = await partnerToken(server, first);
    const api = (method: string, path: string, body?: unknown) =>
      fetch(`${server.partnerUrl}/api/public/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });

    const whoami = await load(`${label}: (b) GET /auth/whoami`, server.child.pid ?? 0, {
      url: `${server.partnerUrl}/api/public/v1/auth/whoami`,
      headers: { authorization: `Bearer ${token}` },
    });

    // (e) 1,000 concurrent creations; then until the engine has finished them all.
    const creations = 1_000;
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: creations }, (_, i) =>
        api('POST', '/customers', { id: `burst-${i}`, owner: { username: 'owner', email: `owner@burst-${i}.example` } }).then(
          (r) => r.status,
        ),
      ),
    );
    const acceptedMs = performance.now() - started;
    const refused = answers.filter((status) => status !== 202).length;
    for (;;) {
      const open = (await (await api('GET', '/customers?status=provisioning&limit=1')).json()) as { data: unknown[] };
      if (open.data.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const doneMs = performance.now() - started;
    notes.lines.push(
      `${label}: (e) ${creations} concurrent creates: all answered in ${Math.round(acceptedMs)} ms (${Math.round((creations * 1000) / acceptedMs)} creates/s, ${refused} not 202); ` +
        `all operations succeeded after ${Math.round(doneMs)} ms (${Math.round((creations * 1000) / doneMs)} operations completed/s)`,
    );

    const single = await load(`${label}: (d) GET /customers/{id}`, server.child.pid ?? 0, {
      url: `${server.partnerUrl}/api/public/v1/customers/burst-500`,
      headers: { authorization: `Bearer ${token}` },
    });

    // The token endpoint allows 10 exchanges at once per key: spread the load over many keys.
    const keyCount = 3_000;
    const keys: string[] = [first];
    for (let i = 1; i < keyCount; i += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, () => operator(server, 'POST', '/partners/bench/keys', {})));
      keys.push(...batch.map((k) => String(k.key)));
    }
    let next = 1;
    const exchange = await load(`${label}: (c) POST /auth/token`, server.child.pid ?? 0, {
      url: `${server.partnerUrl}/api/public/v1/auth/token`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      requests: [
        {
          setupRequest: (request) => ({ ...request, body: JSON.stringify({ api_key: keys[next++ % keys.length] }) }),
        },
      ],
    });

    // (f) 100,000 customers, written straight into the database while the server is stopped (the
    // embedded database belongs to one process), then the first page and a page 90% deep.
    await server.stop();
    await seedCustomers(env, 100_000);
    server = await spawnServe(serveEnv, { keepOutput: false });
    token = await partnerToken(server, first);
    let cursor: string | null = null;
    let walked = 0;
    while (walked < 90_000) {
      const page = (await (await api('GET', `/customers?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).json()) as {
        data: unknown[];
        pagination: { next_cursor: string | null };
      };
      walked += page.data.length;
      cursor = page.pagination.next_cursor;
      if (!cursor) break;
    }
    const pageLoad = { connections: 8, headers: { authorization: `Bearer ${token}` } };
    const firstPage = await load(`${label}: (f) first page of 100k`, server.child.pid ?? 0, {
      ...pageLoad,
      url: `${server.partnerUrl}/api/public/v1/customers?limit=200`,
    });
    const deepPage = await load(`${label}: (f) page 90% deep`, server.child.pid ?? 0, {
      ...pageLoad,
      url: `${server.partnerUrl}/api/public/v1/customers?limit=200&cursor=${encodeURIComponent(cursor ?? '')}`,
    });
    notes.lines.push(
      `${label}: (f) deep page p50 ${deepPage.p50} ms / first page p50 ${firstPage.p50} ms = ${(deepPage.p50 / Math.max(firstPage.p50, 0.01)).toFixed(2)} (goal: at most 1.5); ` +
        `p99 ${deepPage.p99} / ${firstPage.p99} ms`,
    );
    return [whoami, single, exchange, firstPage, deepPage];
  } finally {
    await server.stop();
  }
}

/** Writes `count` active customers of partner `bench`, each with an owner and a project, as the API would. */
async function seedCustomers(env: Record<string, string>, count: number): Promise<void> {
  const handle = await openServerDatabase(env);
  try {
    await sql`
      insert into customers (uid, platform_scope, partner_id, mode, id, external_id, display_name, status, plan_id,
                             owner_username, owner_email, created_at, updated_at)
      select 'cus_seed' || g, 'live', 'bench', 'live', 'seed-' || lpad(g::text, 6, '0'), 'crm-' || g, null, 'active', 'standard',
             'owner', 'owner@seed-' || g || '.example', now(), now()
      from generate_series(1, ${count}) as g`.execute(handle.db);
    await sql`update partners set customer_count = customer_count + ${count} where id = 'bench'`.execute(handle.db);
    await sql`analyze customers`.execute(handle.db);
  } finally {
    await handle.close();
  }
}

async function postgresDatabase(): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const admin = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2_000 });
  try {
    await admin.connect();
  } catch {
    return undefined;
  }
  const name = `tenantry_bench_${Date.now()}`;
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const again = new pg.Client({ connectionString: POSTGRES_URL });
      await again.connect();
      await again.query(`drop database if exists ${name} with (force)`);
      await again.end();
    },
  };
}

async function bare(): Promise<Result> {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./bare-server.ts', import.meta.url))], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString('utf8')).partner_api as string));
  });
  try {
    return await load('(a) bare Fastify route', child.pid ?? 0, { url: `${url}/bare` });
  } finally {
    child.kill('SIGTERM');
  }
}

const pad = (value: string | number, width: number) => String(value).padStart(width);

function print(results: Result[], baseline: Result): void {
  process.stdout.write(
    `\n${'benchmark'.padEnd(40)}${pad('req/s', 9)}${pad('p50 ms', 9)}${pad('p99 ms', 9)}${pad('non-2xx', 9)}${pad('vs (a)', 9)}${pad('CPU µs/req', 12)}\n`,
  );
  for (const r of results) {
    const ratio = (r.rps / baseline.rps).toFixed(2);
    process.stdout.write(
      `${r.name.padEnd(40)}${pad(r.rps, 9)}${pad(r.p50, 9)}${pad(r.p99, 9)}${pad(r.non2xx, 9)}${pad(ratio, 9)}${pad(r.cpuUs, 12)}\n`,
    );
  }
}

process.stdout.write(
  `tenantry bench: ${CONNECTIONS} connections, ${DURATION_S} s per run, median of ${ROUNDS} runs, node ${process.version}\n`,
);
// BENCH_ONLY=api, webhooks, quotas, sdk or images runs one part; all by default.
const only = process.env.BENCH_ONLY;
const baseline = await bare();
const results: Result[] = [baseline];
const notes: Notes = { lines: [] };
const embedded = () => ({ TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-bench-')) });
/** Runs `part` on a fresh PostgreSQL database, if one is reachable. */
async function onPostgres<T>(part: (env: Record<string, string>) => Promise<T>): Promise<T | undefined> {
  const postgres = await postgresDatabase();
  if (!postgres) {
    process.stdout.write(`PostgreSQL at ${POSTGRES_URL} is unreachable: its runs are skipped.\n`);
    return undefined;
  }
  try {
    return await part({ ...embedded(), TENANTRY_DATABASE_URL: postgres.url });
  } finally {
    await postgres.drop();
  }
}
if (only === undefined || only === 'api') {
  results.push(...(await benchDatabase('PGlite', embedded(), notes)));
  results.push(...((await onPostgres((env) => benchDatabase('PostgreSQL', env, notes))) ?? []));
}
if (only === undefined || only === 'quotas') {
  notes.lines.push(...(await benchQuotas('PGlite', embedded())));
  notes.lines.push(...((await onPostgres((env) => benchQuotas('PostgreSQL', env))) ?? []));
}
if (only === undefined || only === 'webhooks') {
  notes.lines.push(...(await benchWebhooks('PGlite', embedded())));
  notes.lines.push(...((await onPostgres((env) => benchWebhooks('PostgreSQL', env))) ?? []));
}
if (only === undefined || only === 'sdk') {
  notes.lines.push(...(await benchSdk('PGlite', embedded())));
}
if (only === undefined || only === 'images') {
  const images = await benchImages('PGlite', embedded());
  results.push(...images.results);
  notes.lines.push(...images.notes);
}
print(results, baseline);
const whoamiRatios = results
  .filter((r) => r.name.includes('whoami') || r.name.includes('/customers/{id}'))
  .map(
    (r) => `${r.name}: vs (a) = ${(r.rps / baseline.rps).toFixed(2)} (by server CPU per request: ${(baseline.cpuUs / r.cpuUs).toFixed(2)})`,
  );
process.stdout.write(`\n${whoamiRatios.join('\n')}\n(goal: at least 0.5)\n\n${notes.lines.join('\n')}\n`);
