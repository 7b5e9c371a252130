import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { openAppDatabase as openDatabase } from '../src/app/database.ts';
import type { ServeProcess } from '../test/serve-process.ts';

/** Shared by the bench scripts: the operator token the spawned servers run with, and API helpers. */
export const OPERATOR_TOKEN = 'bench-operator-token-0123456789';

const scratch: string[] = [];
/**
 * A new folder of the bench's own under the system's temporary folder (a server's data, an embedded
 * database's copy), removed when the bench's process exits, whether the run finished or failed.
 */
export function scratchDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `tenantry-bench-${name}-`));
  if (scratch.push(dir) === 1)
    process.on('exit', () => {
      for (const each of scratch) rmSync(each, { recursive: true, force: true });
    });
  return dir;
}

/**
 * The environment of a bench's `tenantry serve`: the bench's operator token, the sandbox with no delay,
 * and BENCH_SERVE_NODE_OPTIONS as NODE_OPTIONS (`--cpu-prof` profiles the server, written when it stops).
 */
export function benchServeEnv(env: Record<string, string>, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...env,
    TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN,
    TENANTRY_SANDBOX_DELAY_MS: '0',
    ...extra,
    ...(process.env.BENCH_SERVE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVE_NODE_OPTIONS } : {}),
  };
}

export async function operator(server: ServeProcess, method: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.operatorUrl}/api/operator/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const parsed = (await response.json()) as { data: Record<string, unknown> };
  if (!response.ok) throw new Error(`${method} ${path}: ${JSON.stringify(parsed)}`);
  return parsed.data;
}

export async function partnerToken(server: ServeProcess, key: string): Promise<string> {
  const response = await fetch(`${server.partnerUrl}/api/public/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key: key }),
  });
  return ((await response.json()) as { access_token: string }).access_token;
}

/** The database a spawned server uses, opened from here while that server is stopped (PGlite has one process). */
export function openServerDatabase(env: Record<string, string>) {
  return env.TENANTRY_DATABASE_URL
    ? openDatabase({ kind: 'postgres', url: env.TENANTRY_DATABASE_URL })
    : openDatabase({ kind: 'embedded', dataDir: join(env.TENANTRY_DATA_DIR ?? '', 'db') });
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

export const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

export interface Result {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  /** Server CPU time per request, microseconds: steadier than req/s on a shared machine. */
  cpuUs: number;
  /** The server's largest resident set while the load ran, MB. */
  rssMb: number;
  /** `cpuUs` by thread: the main thread, V8's helper threads (mostly the collector's parallel work), the rest. */
  threadsUs: ThreadCpu;
}

export interface ThreadCpu {
  main: number;
  v8: number;
  other: number;
}

/** Resident memory of a process, MB, from /proc. */
export function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Math.round(Number(match[1]) / 1024) : Number.NaN;
}

/** CPU time (user + system) a process has used, in microseconds, from /proc. */
export function cpuTimeUs(pid: number): number {
  return statCpuUs(readFileSync(`/proc/${pid}/stat`, 'utf8'));
}

/** The user and system time of a `/proc/…/stat` line (a process's or a thread's), in microseconds. */
export function statCpuUs(stat: string): number {
  // The command name, in parentheses, may itself hold spaces and parentheses: fields start after the last.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / 100;
}

/**
 * Where a machine's CPU went, in microseconds since boot: the processes the bench started are read by
 * pid; PostgreSQL is every process named `postgres` (its backends and background processes, of every
 * cluster on the machine); `busy` and `idle` are the whole machine's (from /proc/stat, idle with I/O wait).
 */
export interface CpuBudget {
  server: number;
  postgres: number;
  bench: number;
  busy: number;
  idle: number;
}

/** A reading of `CpuBudget` for the server process `serverPid`; subtract two readings for a span. */
export function cpuBudget(serverPid: number): CpuBudget {
  let postgres = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.includes(' (postgres) ')) postgres += statCpuUs(stat);
    } catch {
      // the process ended
    }
  }
  // The first line sums every core: user nice system idle iowait irq softirq steal (clock ticks, 100 a second).
  const [user, nice, system, idle, iowait, irq, softirq] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map((ticks) => Number(ticks) * 10_000) as number[];
  const own = process.cpuUsage();
  return {
    server: cpuTimeUs(serverPid),
    postgres,
    bench: own.user + own.system,
    busy: (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0),
    idle: (idle ?? 0) + (iowait ?? 0),
  };
}

/** `after` minus `before`, each part divided by `count` and rounded: a span's CPU per unit of work. */
export function cpuBudgetPer(before: CpuBudget, after: CpuBudget, count: number): CpuBudget {
  const per = (key: keyof CpuBudget) => Math.round((after[key] - before[key]) / count);
  return { server: per('server'), postgres: per('postgres'), bench: per('bench'), busy: per('busy'), idle: per('idle') };
}

/** A span's `CpuBudget` per unit as one line (PostgreSQL's share only when the server uses one). */
export function budgetText(per: CpuBudget, unit: string, onPostgres: boolean): string {
  const postgres = onPostgres ? `, PostgreSQL ${per.postgres} µs` : '';
  return `CPU ${unit}: server ${per.server} µs${postgres}, the bench's load ${per.bench} µs; the machine busy ${per.busy} µs and idle ${per.idle} µs (${availableParallelism()} cores)`;
}

/** CPU time (user + system) of a process's threads, in microseconds, grouped as `ThreadCpu`. */
export function threadCpuUs(pid: number): ThreadCpu {
  const cpu: ThreadCpu = { main: 0, v8: 0, other: 0 };
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    cpu[tid === String(pid) ? 'main' : name.startsWith('V8') ? 'v8' : 'other'] += statCpuUs(stat);
  }
  return cpu;
}

export interface LoadSpec {
  name: string;
  pid: number;
  options: autocannon.Options;
}

/**
 * Runs each load once per round, ROUNDS rounds, alternating between them (a path, then its floor,
 * then the path again...), so a neighbour's burst on a shared machine hits both sides of a ratio alike.
 * Each result is the median round by throughput.
 */
export async function loadInterleaved(specs: LoadSpec[]): Promise<Result[]> {
  const rounds: Result[][] = specs.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, spec] of specs.entries()) rounds[i]?.push(await loadOnce(spec.name, spec.pid, spec.options));
  }
  return rounds.map((results) => {
    results.sort((a, b) => a.rps - b.rps);
    const median = results[Math.floor(results.length / 2)] as Result;
    // Progress, as each measurement ends (the table comes at the end).
    process.stderr.write(`  ${median.name}: ${median.rps} req/s, p99 ${median.p99} ms, ${median.cpuUs} µs CPU/req, ${median.rssMb} MB\n`);
    return median;
  });
}

async function loadOnce(name: string, pid: number, options: autocannon.Options): Promise<Result> {
  // `warmup` (JIT and connection pools settle before sampling) is missing from autocannon's type definitions.
  const warmup = { warmup: { connections: CONNECTIONS, duration: 2 } } as Partial<autocannon.Options>;
  let cpuStart = cpuTimeUs(pid);
  let threadsStart = threadCpuUs(pid);
  // The returned promise is also the run's event emitter (missing from the type definitions).
  const instance = autocannon({ connections: CONNECTIONS, duration: DURATION_S, ...warmup, ...options }) as Promise<autocannon.Result> & {
    on(event: 'start', listener: () => void): void;
  };
  // Count CPU from the end of the warm-up, when sampling starts.
  instance.on('start', () => {
    cpuStart = cpuTimeUs(pid);
    threadsStart = threadCpuUs(pid);
  });
  let peakRss = rssMb(pid);
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, rssMb(pid));
  }, 250);
  let result: autocannon.Result;
  try {
    result = await instance;
  } finally {
    clearInterval(sampler);
  }
  const requests = Math.max(1, result.requests.total);
  const cpuUs = (cpuTimeUs(pid) - cpuStart) / requests;
  const threadsEnd = threadCpuUs(pid);
  const perRequest = (key: keyof ThreadCpu) => Math.round(((threadsEnd[key] - threadsStart[key]) / requests) * 10) / 10;
  return {
    // Tenths: the fast paths cost 10-15 µs, where whole microseconds would move a ratio by 0.07.
    cpuUs: Math.round(cpuUs * 10) / 10,
    name,
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx + result.errors + result.timeouts,
    rssMb: peakRss,
    threadsUs: { main: perRequest('main'), v8: perRequest('v8'), other: perRequest('other') },
  };
}

/** A server of a head-to-head comparison: its token, and how its lines name it ("with <flags>", "at <revision>"). */
export interface Contender {
  server: ServeProcess;
  token: string;
  name: string;
}

/**
 * Servers loaded in turn, round after round, on `GET /customers/burst-0` and `GET /auth/whoami`
 * (BENCH_ONLY=flags and versions): a line per server and path, with its median round's throughput, its
 * CPU a request split by thread, and that CPU as a ratio to the first server's (`first` names it).
 */
export async function headToHead(label: string, contenders: Contender[], first: string): Promise<string[]> {
  const lines: string[] = [];
  for (const path of ['customers/burst-0', 'auth/whoami']) {
    const results = await loadInterleaved(
      contenders.map(({ server, token, name }) => ({
        name: `${label}: GET /${path} ${name}`,
        pid: server.child.pid ?? 0,
        options: { url: `${server.partnerUrl}/api/public/v1/${path}`, headers: { authorization: `Bearer ${token}` } },
      })),
    );
    const baseline = results[0] as Result;
    for (const result of results) {
      const { main, v8, other } = result.threadsUs;
      lines.push(
        `${result.name}: ${result.rps} req/s, ${result.cpuUs} µs CPU a request (main thread ${main}, V8's helpers ${v8}, ` +
          `other ${other}; ${(result.cpuUs / baseline.cpuUs).toFixed(2)} of ${first}), peak ${result.rssMb} MB`,
      );
    }
  }
  return lines;
}
