/**
 * What bounds a phase of the scale part (bench/scale.ts), read while it runs: the CPU of the servers, of
 * PostgreSQL's backends on the bench's database (when they run on this machine), of the bench and of
 * the whole machine, from /proc; backends waiting on a lock, from `pg_stat_activity` every 100 ms; and
 * the statements that took the most time, from `pg_stat_statements` when the server loads it.
 */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import pg from 'pg';
import type { ServeProcess } from '../test/serve-process.ts';
import { cpuBudget, cpuTimeUs, statCpuUs } from './common.ts';

/** The monitoring connection's name, so that its own queries are not counted as the servers'. */
const MONITOR = 'tenantry-bench-monitor';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What a phase cost and where it waited, read over its span. */
export interface Bounds {
  seconds: number;
  /** CPU time in cores (CPU seconds a second) of the servers, PostgreSQL's backends, the bench's process and the machine. */
  servers: number;
  backends: number | undefined;
  bench: number;
  busy: number;
  lockMean: number;
  lockMax: number;
  lockShare: number;
  lockEvent: string;
  statementMs: number;
  statements: Array<{ ms: number; calls: number; query: string }> | undefined;
}

export interface Monitor {
  client: pg.Client;
  /** Whether the server loads pg_stat_statements. */
  statements: boolean;
}

/** The bench's own connection to the database: samples `pg_stat_activity`, reads `pg_stat_statements` where loaded. */
export async function openMonitor(url: string): Promise<Monitor> {
  const client = new pg.Client({ connectionString: url, application_name: MONITOR });
  await client.connect();
  try {
    await client.query('create extension if not exists pg_stat_statements');
  } catch {
    // Not installed, or not allowed: the statements are left out.
  }
  try {
    const { rowCount } = await client.query(`select 1 from pg_extension where extname = 'pg_stat_statements'`);
    // The extension's functions fail unless the server preloads its library.
    if (rowCount) await client.query('select pg_stat_statements_reset()');
    return { client, statements: Boolean(rowCount) };
  } catch {
    return { client, statements: false };
  }
}

/** The CPU time of a PostgreSQL process of this machine, or undefined when `pid` is not one (a server elsewhere). */
function postgresCpuUs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.includes(' (postgres) ') ? statCpuUs(stat) : undefined;
  } catch {
    return undefined;
  }
}

/** Starts watching a phase served by `servers`; the function returned ends it and answers its `Bounds`. */
export async function watch(monitor: Monitor, servers: ServeProcess[]): Promise<() => Promise<Bounds>> {
  const { client } = monitor;
  if (monitor.statements) await client.query('select pg_stat_statements_reset()');
  const pids = servers.map((server) => server.child.pid ?? 0);
  const serverCpu = () => pids.reduce((sum, pid) => sum + cpuTimeUs(pid), 0);
  // Each backend's CPU at its first and latest sample: one that connected during the phase counts from 0.
  const backends = new Map<number, { first: number; last: number }>();
  let foreign = false;
  const waiting: number[] = [];
  const events = new Map<string, number>();
  const sample = async (first: boolean) => {
    const { rows } = await client.query<{ pid: number; wait_event_type: string | null; wait_event: string | null }>(
      `select pid, wait_event_type, wait_event from pg_stat_activity
       where datname = current_database() and backend_type = 'client backend' and application_name <> $1`,
      [MONITOR],
    );
    let locked = 0;
    for (const row of rows) {
      if (row.wait_event_type === 'Lock') {
        locked++;
        events.set(row.wait_event ?? '?', (events.get(row.wait_event ?? '?') ?? 0) + 1);
      }
      const cpu = postgresCpuUs(row.pid);
      if (cpu === undefined) foreign = true;
      else backends.set(row.pid, { first: backends.get(row.pid)?.first ?? (first ? cpu : 0), last: cpu });
    }
    waiting.push(locked);
  };
  const startMs = performance.now();
  const start = { machine: cpuBudget(pids[0] ?? 0), servers: serverCpu() };
  await sample(true);
  let stopped = false;
  const sampling = (async () => {
    while (!stopped) {
      await sleep(100);
      await sample(false);
    }
  })();
  return async () => {
    stopped = true;
    await sampling;
    const end = { machine: cpuBudget(pids[0] ?? 0), servers: serverCpu() };
    const seconds = (performance.now() - startMs) / 1000;
    const cores = (us: number) => us / 1_000_000 / seconds;
    let backendUs = 0;
    for (const { first, last } of backends.values()) backendUs += last - first;
    let statements: Bounds['statements'];
    let statementMs = 0;
    if (monitor.statements) {
      const { rows } = await client.query<{ ms: number; calls: string; query: string }>(
        `select total_exec_time as ms, calls, query from pg_stat_statements
         where dbid = (select oid from pg_database where datname = current_database()) and query not like '%pg_stat%'
         order by total_exec_time desc`,
      );
      statementMs = rows.reduce((sum, row) => sum + row.ms, 0);
      statements = rows.slice(0, 5).map((row) => ({ ms: row.ms, calls: Number(row.calls), query: row.query.replace(/\s+/g, ' ') }));
    }
    return {
      seconds,
      servers: cores(end.servers - start.servers),
      backends: foreign ? undefined : cores(backendUs),
      bench: cores(end.machine.bench - start.machine.bench),
      busy: cores(end.machine.busy - start.machine.busy),
      lockMean: waiting.reduce((sum, n) => sum + n, 0) / Math.max(1, waiting.length),
      lockMax: Math.max(0, ...waiting),
      lockShare: waiting.filter((n) => n > 0).length / Math.max(1, waiting.length),
      lockEvent: [...events].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 'none',
      statementMs,
      statements,
    };
  };
}

const fixed = (value: number) => value.toFixed(2);

/** A phase's bounds as lines: its CPU and lock waits, then its costliest statements. */
export function boundsLines(prefix: string, phase: string, bounds: Bounds): string[] {
  const cores = cpus().length;
  const backends = bounds.backends === undefined ? 'not on this machine' : fixed(bounds.backends);
  // What the machine spent besides: PostgreSQL's own background processes, and whatever else shares it.
  const rest = bounds.busy - bounds.servers - (bounds.backends ?? 0) - bounds.bench;
  const lines = [
    `${prefix} bounds, ${phase}, over ${bounds.seconds.toFixed(1)} s: CPU in cores: servers ${fixed(bounds.servers)}, ` +
      `PostgreSQL's backends ${backends}, the bench's process (load, receiver) ${fixed(bounds.bench)}, the rest ${fixed(rest)}; ` +
      `the machine busy ${fixed(bounds.busy)} of ${cores}${bounds.busy >= 0.9 * cores ? ' (saturated)' : ''}; ` +
      `backends waiting on a lock: ${bounds.lockMean.toFixed(1)} on average, ` +
      `at most ${bounds.lockMax}, in ${Math.round(bounds.lockShare * 100)}% of samples (mostly ${bounds.lockEvent})`,
  ];
  for (const [rank, statement] of (bounds.statements ?? []).entries()) {
    lines.push(
      `${prefix}   statement ${rank + 1} of ${Math.round(bounds.statementMs)} ms: ${Math.round(statement.ms)} ms, ${statement.calls} calls: ` +
        `${statement.query.slice(0, 110)}${statement.query.length > 110 ? '…' : ''}`,
    );
  }
  return lines;
}
