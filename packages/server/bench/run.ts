/**
 * `npm run bench`: throughput and latency of the hot paths, on the embedded
 * database and on PostgreSQL, against a bare route of the same framework.
 *
 *   (a) GET /bare              a Fastify route with no auth and no database
 *   (b) GET /auth/whoami       token check, partner lookup, rate limit, response
 *   (c) POST /auth/token       key lookup, constant-time hash check, token signing
 *
 * The server runs in its own process (as `tenantry serve`); the load comes
 * from this one, over loopback. Set TENANTRY_BENCH_DATABASE_URL to choose the
 * PostgreSQL server (default: the local test database, skipped if unreachable).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { type ServeProcess, spawnServe } from '../test/serve-process.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const POSTGRES_URL = process.env.TENANTRY_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const OPERATOR_TOKEN = 'bench-operator-token-0123456789';

interface Result {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  /** Server CPU time per request, microseconds: steadier than req/s on a shared machine. */
  cpuUs: number;
}

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/** CPU time (user + system) a process has used, in microseconds, from /proc. */
function cpuTimeUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1_000_000) / 100;
}

/** Runs a load ROUNDS times and keeps the median round by throughput. */
async function load(name: string, pid: number, options: autocannon.Options): Promise<Result> {
  const rounds: Result[] = [];
  for (let i = 0; i < ROUNDS; i++) rounds.push(await loadOnce(name, pid, options));
  rounds.sort((a, b) => a.rps - b.rps);
  return rounds[Math.floor(rounds.length / 2)] as Result;
}

async function loadOnce(name: string, pid: number, options: autocannon.Options): Promise<Result> {
  // `warmup` (JIT and connection pools settle before sampling) is missing from autocannon's type definitions.
  const warmup = { warmup: { connections: CONNECTIONS, duration: 2 } } as Partial<autocannon.Options>;
  let cpuStart = cpuTimeUs(pid);
  // The returned promise is also the run's event emitter (missing from the type definitions).
  const instance = autocannon({ connections: CONNECTIONS, duration: DURATION_S, ...warmup, ...options }) as Promise<autocannon.Result> & {
    on(event: 'start', listener: () => void): void;
  };
  // Count CPU from the end of the warm-up, when sampling starts.
  instance.on('start', () => {
    cpuStart = cpuTimeUs(pid);
  });
  const result = await instance;
  const cpuUs = (cpuTimeUs(pid) - cpuStart) / Math.max(1, result.requests.total);
  return {
    cpuUs: Math.round(cpuUs),
    name,
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx + result.errors + result.timeouts,
  };
}

async function operator(server: ServeProcess, method: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.operatorUrl}/api/operator/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const parsed = (await response.json()) as { data: Record<string, unknown> };
  if (!response.ok) throw new Error(`${method} ${path}: ${JSON.stringify(parsed)}`);
  return parsed.data;
}

async function benchDatabase(label: string, env: Record<string, string>): Promise<Result[]> {
  // Logging stays at info, as in production: one JSON line per request is part of the cost.
  const server = await spawnServe(
    { ...env, TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN, TENANTRY_SANDBOX_DELAY_MS: '0' },
    { keepOutput: false },
  );
  try {
    await operator(server, 'POST', '/partners', {
      id: 'bench',
      display_name: 'Bench',
      limits: { rate_limit_per_minute: 10_000_000, rate_limit_burst: 1_000_000 },
    });
    const first = String((await operator(server, 'POST', '/partners/bench/keys', {})).key);
    const tokenResponse = await fetch(`${server.partnerUrl}/api/public/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: first }),
    });
    const { access_token: token } = (await tokenResponse.json()) as { access_token: string };

    const whoami = await load(`${label}: (b) GET /auth/whoami`, server.child.pid ?? 0, {
      url: `${server.partnerUrl}/api/public/v1/auth/whoami`,
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
    return [whoami, exchange];
  } finally {
    await server.stop();
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
const baseline = await bare();
const results: Result[] = [baseline];
results.push(...(await benchDatabase('PGlite', { TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-bench-')) })));
const postgres = await postgresDatabase();
if (postgres) {
  try {
    results.push(...(await benchDatabase('PostgreSQL', { TENANTRY_DATABASE_URL: postgres.url })));
  } finally {
    await postgres.drop();
  }
} else {
  process.stdout.write(`PostgreSQL at ${POSTGRES_URL} is unreachable: its runs are skipped.\n`);
}
print(results, baseline);
const whoamiRatios = results
  .filter((r) => r.name.includes('whoami'))
  .map(
    (r) =>
      `${r.name.split(':')[0]} b/a = ${(r.rps / baseline.rps).toFixed(2)} (by server CPU per request: ${(baseline.cpuUs / r.cpuUs).toFixed(2)})`,
  );
process.stdout.write(`\n${whoamiRatios.join(', ')} (goal: at least 0.5)\n`);
