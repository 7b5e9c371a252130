/**
 * `npm run bench`: every hot path against its floor, measured in the same run, on the embedded database
 * and on PostgreSQL. The floors run in their own process on the same Node (bench/reference-server.ts):
 *
 *   bare node:http        node:http alone answering a small JSON envelope: the floor of every route
 *   bare, whoami's answer node:http writing whoami's headers and a body of its size, serialised per request:
 *                         what the contract's answer costs with nothing else (its ratio to bare is the most
 *                         whoami can reach)
 *   raw SELECT            node:http running the one SELECT `GET /customers/{id}` runs, with the same driver
 *                         on the same database: the floor of a read
 *
 *   (b) GET /auth/whoami       token check, partner lookup, rate limit, response      vs bare node:http (goal 0.6)
 *   (c) POST /auth/token       key lookup, constant-time hash check, token signing    vs raw SELECT (goal 0.5)
 *   (d) GET /customers/{id}    token, rate limit, one SELECT, validation, response     vs raw SELECT (goal 0.9)
 *   (e) 1,000 concurrent POST /customers on the sandbox (delay 0): creates accepted per second, and
 *       operations completed per second (BENCH_ONLY=operations: on a new server, then again warm, each
 *       with the CPU a customer cost the server, PostgreSQL and the bench); with it also (e2), the engine alone: a
 *       backlog of as many creations drained by a server started on it (BENCH_ENGINE_CONCURRENCY)
 *   (f) GET /customers?limit=200 with 100,000 customers: the first page and a page 90% deep
 *   (g) webhooks (bench/webhooks.ts): deliveries per second to an HTTPS receiver, and delivery lag
 *   (h) quotas (bench/quotas.ts): PUT /customers/{id}/quota per second
 *   (i) sdk (bench/sdk.ts): what @tenantry/sdk adds on the caller's side to a GET /customers/{id}
 *   (j) images (bench/os-images.ts): GET /api/create-vm/{ns}/os-images against a bare node:http route
 *   (k) startup (bench/startup.ts): the installed command on an existing embedded database to a healthy
 *       /readyz (goal 1.5 s), and an operator command against it (goal 0.5 s)
 *   (l) scale (bench/scale.ts, PostgreSQL only): creations, webhook deliveries and reads by one process, then three
 *
 * Each row prints throughput, p50/p99, the server's CPU time per request and its largest resident set
 * during the load, next to its floor and the ratio (by req/s and by CPU per request: the second is
 * steadier on a shared machine). BENCH_ONLY=api, operations, webhooks, quotas, sdk, images, startup or scale runs one part;
 * BENCH_ONLY=flags compares sets of Node flags for the server head to head (bench/node-flags.ts);
 * BENCH_DURATION_S, BENCH_ROUNDS and BENCH_CONNECTIONS shorten or widen the runs.
 * The server runs in its own process (as `tenantry serve`); the load comes from this one, over loopback.
 * Set TENANTRY_BENCH_DATABASE_URL to choose the PostgreSQL server (default: the local test database,
 * skipped if unreachable), and BENCH_DB_LATENCY_MS to put it that many milliseconds away each way
 * (bench/latency-proxy.ts; meant for BENCH_ONLY=operations, where round trips under a lock count).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import pg from 'pg';
import { TOKEN_ENDPOINT_POLICY } from '../src/auth/service.ts';
import { spawnServe } from '../test/serve-process.ts';
import {
  benchServeEnv,
  CONNECTIONS,
  DURATION_S,
  loadInterleaved,
  openServerDatabase,
  operator,
  partnerToken,
  type Result,
  ROUNDS,
  rssMb,
  scratchDir,
} from './common.ts';
import { startLatencyProxy } from './latency-proxy.ts';
import { benchNodeFlags } from './node-flags.ts';
import { benchOperations, benchPartner, burstCreates } from './operations.ts';
import { benchImages } from './os-images.ts';
import { benchQuotas } from './quotas.ts';
import { markdownReport, type Row, runFacts, writeReport } from './report.ts';
import { benchScale } from './scale.ts';
import { benchSdk } from './sdk.ts';
import { benchStartup } from './startup.ts';
import { benchVersions } from './versions.ts';
import { benchWebhooks } from './webhooks.ts';

const POSTGRES_URL = process.env.TENANTRY_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DB_LATENCY_MS = Number(process.env.BENCH_DB_LATENCY_MS ?? 0);
const POSTGRES_LABEL = DB_LATENCY_MS > 0 ? `PostgreSQL ${DB_LATENCY_MS} ms away` : 'PostgreSQL';

interface Notes {
  lines: string[];
}

/**
 * The floors' process (bench/reference-server.ts) on the database `env` names. An embedded database
 * belongs to one process, so its floor reads a copy taken while the server was stopped: the same rows.
 */
async function startFloors(env: Record<string, string>): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  let target = env.TENANTRY_DATABASE_URL;
  if (!target) {
    target = scratchDir('floor');
    cpSync(join(env.TENANTRY_DATA_DIR ?? '', 'db'), target, { recursive: true });
  }
  const child = spawn(process.execPath, [fileURLToPath(new URL('./reference-server.ts', import.meta.url)), target, 'bench'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString('utf8')).url as string));
    child.once('exit', (code) => reject(new Error(`reference server exited with ${code}`)));
  });
  return {
    url,
    pid: child.pid ?? 0,
    stop: async () => {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

async function benchDatabase(label: string, env: Record<string, string>, notes: Notes): Promise<Row[]> {
  // Logging stays at info, as in production: one JSON line per request is part of the cost.
  const serveEnv = benchServeEnv(env, process.env.BENCH_SERVE_LOG_LEVEL ? { TENANTRY_LOG_LEVEL: process.env.BENCH_SERVE_LOG_LEVEL } : {});
  let server = await spawnServe(serveEnv, { keepOutput: false });
  let floor: Awaited<ReturnType<typeof startFloors>> | undefined;
  // Idle: started, nothing asked yet but the health check, settled for two seconds. On a new embedded
  // database this start also ran initdb, whose memory may not be collected yet: see the restart below.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  notes.lines.push(`${label}: resident memory of tenantry serve idle after start: ${rssMb(server.child.pid ?? 0)} MB`);
  try {
    const partner = await benchPartner(server, 'bench');
    const first = partner.key;
    let token = await partnerToken(server, first);
    const api = (method: string, path: string, body?: unknown) =>
      fetch(`${server.partnerUrl}/api/public/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });

    // (e) 1,000 concurrent creations; then until the engine has finished them all.
    // BENCH_ONLY=hot: the hot paths and their floors only (one customer, no list of 100,000).
    const creations = HOT_ONLY ? 1 : 1_000;
    const readId = `burst-${Math.floor(creations / 2)}`;
    notes.lines.push(await burstCreates(HOT_ONLY ? label : `${label}, new server`, partner.api, creations));

    // The token endpoint allows a burst of 10 exchanges per key, then one every 2 s: a round (warm-up
    // included) is spread over enough keys that none is refused at up to 12,000 exchanges a second, and
    // the rounds of the other paths between two token rounds (about 24 s) fill every key's bucket again.
    // With fewer keys, refused exchanges (cheaper than real ones) made the row's figures a mix.
    const keyCount = Math.ceil(((2 + DURATION_S) * 12_000) / TOKEN_ENDPOINT_POLICY.burst);
    const keys: string[] = [first];
    while (keys.length < keyCount) {
      const batch = await Promise.all(Array.from({ length: 100 }, () => operator(server, 'POST', '/partners/bench/keys', {})));
      keys.push(...batch.map((k) => String(k.key)));
    }
    // The floors run beside the server; on the embedded database they read a copy (one process per database).
    if (!env.TENANTRY_DATABASE_URL) {
      await server.stop();
      floor = await startFloors(env);
      server = await spawnServe(serveEnv, { keepOutput: false });
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      notes.lines.push(`${label}: resident memory of tenantry serve idle after a restart: ${rssMb(server.child.pid ?? 0)} MB`);
      token = await partnerToken(server, first);
    } else {
      floor = await startFloors(env);
    }
    const pid = server.child.pid ?? 0;
    const auth = { authorization: `Bearer ${token}` };
    let next = 1;
    const [bareFloor, bareWhoami, whoami, selectFloor, single, exchange] = await loadInterleaved([
      { name: `${label}: bare node:http`, pid: floor.pid, options: { url: `${floor.url}/bare` } },
      { name: `${label}: bare, whoami's answer`, pid: floor.pid, options: { url: `${floor.url}/bare-whoami` } },
      { name: `${label}: (b) GET /auth/whoami`, pid, options: { url: `${server.partnerUrl}/api/public/v1/auth/whoami`, headers: auth } },
      { name: `${label}: raw SELECT route`, pid: floor.pid, options: { url: `${floor.url}/customers/${readId}` } },
      {
        name: `${label}: (d) GET /customers/{id}`,
        pid,
        options: { url: `${server.partnerUrl}/api/public/v1/customers/${readId}`, headers: auth },
      },
      {
        name: `${label}: (c) POST /auth/token`,
        pid,
        options: {
          url: `${server.partnerUrl}/api/public/v1/auth/token`,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          requests: [{ setupRequest: (request) => ({ ...request, body: JSON.stringify({ api_key: keys[next++ % keys.length] }) }) }],
        },
      },
    ]);
    await floor.stop();
    floor = undefined;
    // (e) again, now that the server has run the hot paths (and, on PostgreSQL, the burst above; the
    // embedded database's server was restarted since): the throughput of a server past its warm-up, as
    // the hot paths are measured after theirs, beside the new server's above. A partner
    // of its own: a partner's sandbox address space holds 1,024 projects.
    if (!HOT_ONLY) notes.lines.push(await burstCreates(`${label}, warm server`, (await benchPartner(server, 'warm')).api, creations));
    const hot: Row[] = [
      { result: bareFloor as Result },
      { result: bareWhoami as Result, floor: bareFloor },
      { result: selectFloor as Result },
      { result: whoami as Result, floor: bareFloor, goal: 0.6 },
      { result: single as Result, floor: selectFloor, goal: 0.9 },
      { result: exchange as Result, floor: selectFloor, goal: 0.5 },
    ];
    if (HOT_ONLY) return hot;

    // (f) LIST_SIZE customers (100,000; BENCH_LIST_SIZE=1000000 for the issue's million), written straight
    // into the database while the server is stopped (the embedded database belongs to one process), then
    // the first page and a page 90% deep.
    await server.stop();
    await seedCustomers(env, LIST_SIZE);
    server = await spawnServe(serveEnv, { keepOutput: false });
    token = await partnerToken(server, first);
    let cursor: string | null = null;
    let walked = 0;
    while (walked < LIST_SIZE * 0.9) {
      const page = (await (await api('GET', `/customers?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).json()) as {
        data: unknown[];
        pagination: { next_cursor: string | null };
      };
      walked += page.data.length;
      cursor = page.pagination.next_cursor;
      if (!cursor) break;
    }
    // The two pages alternate, ROUNDS rounds each (median by throughput), so a slower minute of a shared
    // machine weighs on both sides of the ratio alike. The p50 is in whole milliseconds
    // (autocannon's histogram): the server's CPU a page is given beside it.
    const pageLoad = { connections: 8, headers: { authorization: `Bearer ${token}` } };
    const [firstPage, deepPage] = (await loadInterleaved([
      {
        name: `${label}: (f) first page of ${LIST_SIZE / 1000}k`,
        pid: server.child.pid ?? 0,
        options: { ...pageLoad, url: `${server.partnerUrl}/api/public/v1/customers?limit=200` },
      },
      {
        name: `${label}: (f) page 90% deep`,
        pid: server.child.pid ?? 0,
        options: { ...pageLoad, url: `${server.partnerUrl}/api/public/v1/customers?limit=200&cursor=${encodeURIComponent(cursor ?? '')}` },
      },
    ])) as [Result, Result];
    notes.lines.push(
      `${label}: (f) deep page p50 ${deepPage.p50} ms / first page p50 ${firstPage.p50} ms = ${(deepPage.p50 / Math.max(firstPage.p50, 0.01)).toFixed(2)} (goal: at most 1.2, issue 19); ` +
        `p99 ${deepPage.p99} / ${firstPage.p99} ms; by the server's CPU a page ${deepPage.cpuUs} / ${firstPage.cpuUs} µs = ${(deepPage.cpuUs / Math.max(firstPage.cpuUs, 0.1)).toFixed(2)}`,
    );
    return [...hot, { result: firstPage }, { result: deepPage }];
  } finally {
    await server.stop();
    await floor?.stop();
  }
}

/** Writes `count` active customers of partner `bench`, each with an owner and a project, as the API would. */
async function seedCustomers(env: Record<string, string>, count: number): Promise<void> {
  const handle = await openServerDatabase(env);
  try {
    await sql`
      insert into customers (uid, platform_scope, partner_id, mode, id, external_id, display_name, status,
                             organization, owner_username, owner_email, created_at, updated_at)
      select 'cus_seed' || g, 'live', 'bench', 'live', 'seed-' || lpad(g::text, ${String(count).length}, '0'), 'crm-' || g, null, 'active',
             'bench-seed-' || g,
             'owner', 'owner@seed-' || g || '.example', now(), now()
      from generate_series(1, ${count}) as g`.execute(handle.db);
    // Each with its plan (its quota left empty: the seeded customers take nothing from the pool).
    await sql`
      insert into customer_quotas (customer_uid, plan_id, quota, quota_revision, project_caps, quota_applied_revision)
      select 'cus_seed' || g, 'standard', '{"vcpu":0,"memory_gib":0,"storage_gib":0,"gpus":{}}', 1, '{}', 1
      from generate_series(1, ${count}) as g`.execute(handle.db);
    await sql`update partners set customer_count = customer_count + ${count} where id = 'bench'`.execute(handle.db);
    await sql`analyze customers`.execute(handle.db);
    await sql`analyze customer_quotas`.execute(handle.db);
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
  // BENCH_DB_LATENCY_MS: the server reaches the database through a proxy that delays each way.
  const proxy =
    DB_LATENCY_MS > 0 ? await startLatencyProxy({ host: url.hostname, port: Number(url.port || 5432) }, DB_LATENCY_MS) : undefined;
  if (proxy) {
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
  }
  return {
    url: url.toString(),
    drop: async () => {
      await proxy?.close();
      const again = new pg.Client({ connectionString: POSTGRES_URL });
      await again.connect();
      await again.query(`drop database if exists ${name} with (force)`);
      await again.end();
    },
  };
}

const pad = (value: string | number, width: number) => String(value).padStart(width);

function print(rows: Row[]): void {
  const columns: Array<[string, number]> = [
    ['path', 44],
    ['req/s', 8],
    ['p50 ms', 8],
    ['p99 ms', 8],
    ['non-2xx', 8],
    ['CPU µs', 8],
    ['RSS MB', 8],
    ['floor', 26],
    ['ratio', 7],
    ['by CPU', 7],
    ['goal', 6],
  ];
  const line = (cells: Array<string | number>) =>
    `${cells.map((cell, i) => (i === 0 || i === 7 ? String(cell).padEnd(columns[i]?.[1] ?? 0) : pad(cell, columns[i]?.[1] ?? 0))).join(' ')}\n`;
  process.stdout.write(`\n${line(columns.map(([name]) => name))}`);
  for (const { result: r, floor, goal } of rows) {
    const ratio = floor ? (r.rps / floor.rps).toFixed(2) : '';
    const byCpu = floor ? (floor.cpuUs / r.cpuUs).toFixed(2) : '';
    const floorName = floor ? `${floor.name.split(': ').pop()} ${floor.rps}/s` : '';
    process.stdout.write(line([r.name, r.rps, r.p50, r.p99, r.non2xx, r.cpuUs, r.rssMb, floorName, ratio, byCpu, goal ? `≥ ${goal}` : '']));
  }
}

/** Read before the run: the load average at its start says how busy the machine was. */
const facts = runFacts(
  `${CONNECTIONS} connections, ${DURATION_S} s rounds, median of ${ROUNDS}${process.env.BENCH_ONLY ? `, BENCH_ONLY=${process.env.BENCH_ONLY}` : ''}`,
);
process.stdout.write(
  `tenantry bench: ${CONNECTIONS} connections, ${DURATION_S} s per run, median of ${ROUNDS} runs, node ${process.version}\n`,
);
// BENCH_ONLY=api, operations (e alone), webhooks, quotas, sdk, images, startup or scale runs one part; all by default.
// BENCH_ONLY=flags and versions (not part of the default run) compare Node flags, and this checkout with
// other revisions (BENCH_VERSIONS), head to head.
const only = process.env.BENCH_ONLY;
const HOT_ONLY = only === 'hot';
/** The customers the list part seeds (BENCH_LIST_SIZE). */
const LIST_SIZE = Number(process.env.BENCH_LIST_SIZE ?? 100_000);
if (!Number.isInteger(LIST_SIZE) || LIST_SIZE < 1_000)
  throw new Error(`BENCH_LIST_SIZE must be a whole number of at least 1000, not ${process.env.BENCH_LIST_SIZE}`);
// BENCH_DATABASES=pglite or postgres runs the api, webhooks and images parts on one database.
const DATABASES = (process.env.BENCH_DATABASES ?? 'pglite,postgres').split(',');
const rows: Row[] = [];
const notes: Notes = { lines: [] };
// A data directory that does not exist yet, as on a new clone's first `npm start`.
const embedded = () => ({ TENANTRY_DATA_DIR: join(scratchDir('data'), 'tenantry') });
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
if (only === undefined || only === 'api' || HOT_ONLY) {
  if (DATABASES.includes('pglite')) rows.push(...(await benchDatabase('PGlite', embedded(), notes)));
  if (DATABASES.includes('postgres')) rows.push(...((await onPostgres((env) => benchDatabase(POSTGRES_LABEL, env, notes))) ?? []));
}
if (only === 'operations') {
  if (DATABASES.includes('pglite')) notes.lines.push(...(await benchOperations('PGlite', embedded())));
  if (DATABASES.includes('postgres')) notes.lines.push(...((await onPostgres((env) => benchOperations(POSTGRES_LABEL, env))) ?? []));
}
if (only === 'flags') notes.lines.push(...((await onPostgres((env) => benchNodeFlags(POSTGRES_LABEL, env))) ?? []));
if (only === 'versions') notes.lines.push(...(await benchVersions(POSTGRES_LABEL, postgresDatabase)));
if (only === undefined || only === 'quotas') {
  notes.lines.push(...(await benchQuotas('PGlite', embedded())));
  notes.lines.push(...((await onPostgres((env) => benchQuotas(POSTGRES_LABEL, env))) ?? []));
}
if (only === undefined || only === 'webhooks') {
  if (DATABASES.includes('pglite')) notes.lines.push(...(await benchWebhooks('PGlite', embedded())));
  if (DATABASES.includes('postgres')) notes.lines.push(...((await onPostgres((env) => benchWebhooks(POSTGRES_LABEL, env))) ?? []));
}
if (only === undefined || only === 'sdk') {
  notes.lines.push(...(await benchSdk('PGlite', embedded())));
}
if (only === undefined || only === 'images') {
  for (const images of [
    ...(DATABASES.includes('pglite') ? [await benchImages('PGlite', embedded())] : []),
    ...(DATABASES.includes('postgres') ? [await onPostgres((env) => benchImages(POSTGRES_LABEL, env))] : []),
  ]) {
    if (!images) continue;
    const [bareImages, ...served] = images.results;
    if (bareImages) rows.push({ result: bareImages }, ...served.map((result) => ({ result, floor: bareImages, goal: 0.8 })));
    notes.lines.push(...images.notes);
  }
}
if (only === undefined || only === 'startup') notes.lines.push(...(await benchStartup('PGlite', embedded())));
if ((only === undefined && DATABASES.includes('postgres')) || only === 'scale')
  notes.lines.push(...(await benchScale(POSTGRES_LABEL, onPostgres)));
print(rows);
process.stdout.write(`\n${notes.lines.join('\n')}\n`);
// BENCH_WRITE_DOCS=1 (`npm run bench:docs`): the run also replaces the table in docs/performance.md.
if (process.env.BENCH_WRITE_DOCS === '1') {
  const file = fileURLToPath(new URL('../../../docs/performance.md', import.meta.url));
  writeReport(file, markdownReport(rows, notes.lines, facts));
  process.stdout.write(`\nThe run is written into ${file}.\n`);
}
