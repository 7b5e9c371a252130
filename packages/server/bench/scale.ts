/**
 * (l) Scale (BENCH_ONLY=scale; in the whole run on PostgreSQL only): one PostgreSQL database served by one
 * `tenantry serve` process, then by three new ones on it (one secret key and operator token, as a
 * deployment's replicas), measuring in each setting:
 *   - customer creations finished per second: BENCH_CREATIONS concurrent `POST /customers` of one partner,
 *     spread over the processes in turn, until every operation succeeded;
 *   - webhook deliveries per second: a backlog of BACKLOG queued events over RECEIVERS receivers, held
 *     back by a lease while it is written, then released at once;
 *   - `GET /customers/{id}` per second: one autocannon per process, BENCH_CONNECTIONS split between them;
 * each with its p99, and the three-to-one ratio. Every process, PostgreSQL and the load share this machine,
 * so more processes add no CPU: what bounds each figure is printed beside it (the CPU of the servers and
 * of PostgreSQL's backends, backends waiting on locks, and the costliest statements when the server loads
 * pg_stat_statements). BENCH_SCALE_OWN_POSTGRES=1 runs on a throwaway instance that loads it.
 */
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { sql } from 'kysely';
import pg from 'pg';
import { EventService } from '../src/events/service.ts';
import { CursorCodec } from '../src/infra/pagination/cursor.ts';
import { queueDelivery } from '../src/webhooks/store.ts';
import { startPostgres } from '../test/postgres-instance.ts';
import { type ServeProcess, spawnServe } from '../test/serve-process.ts';
import { TEST_CA_FILE, WebhookReceiver } from '../test/webhook-receiver.ts';
import { type Bounds, boundsLines, type Monitor, openMonitor, watch } from './bounds.ts';
import { type Answer, partnerClient } from './client.ts';
import {
  benchServeEnv,
  CONNECTIONS,
  DURATION_S,
  openServerDatabase,
  operator,
  partnerToken,
  percentile,
  ROUNDS,
  scratchDir,
} from './common.ts';
import { benchPartner, untilProvisioned } from './operations.ts';

const CREATIONS = Number(process.env.BENCH_CREATIONS ?? 1_000);
const BACKLOG = 5_000;
/** The backlog's partners: one receiver takes at most TENANTRY_WEBHOOK_CONCURRENCY deliveries at once across every process. */
const RECEIVERS = 4;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
type Api = (method: string, path: string, body?: unknown) => Promise<Answer>;

interface Figure {
  rate: number;
  /** The p99s, by what they time, in milliseconds. */
  p99s: Array<[string, number]>;
  /** What went wrong on the way (retried deliveries, refused reads), if anything did. */
  trouble?: string;
  bounds: Bounds;
}

/** A burst of creations spread over the servers in turn, until every operation succeeded. */
async function creations(monitor: Monitor, servers: ServeProcess[], id: string, key: string): Promise<Figure> {
  const apis = await Promise.all(servers.map((server) => partnerClient(server, key)));
  const stop = await watch(monitor, servers);
  const started = performance.now();
  const answered: number[] = [];
  const statuses = await Promise.all(
    Array.from({ length: CREATIONS }, (_, i) =>
      (apis[i % apis.length] as Api)('POST', '/customers', {
        id: `${id}-${i}`,
        owner: { username: 'owner', email: `owner@${id}-${i}.example` },
      }).then((answer) => {
        answered.push(performance.now() - started);
        return answer.status;
      }),
    ),
  );
  const refused = statuses.filter((status) => status !== 202).length;
  if (refused > 0) throw new Error(`${refused} of the scale part's creates were not accepted`);
  await untilProvisioned(apis[0] as Api);
  const doneMs = performance.now() - started;
  const bounds = await stop();
  const { rows } = await monitor.client.query<{ p99: number }>(
    `select percentile_disc(0.99) within group (order by extract(epoch from finished_at - created_at) * 1000) as p99
     from operations where partner_id = $1 and type = 'customer.create'`,
    [id],
  );
  answered.sort((a, b) => a - b);
  return {
    rate: (CREATIONS * 1000) / doneMs,
    p99s: [
      ['create answered', percentile(answered, 99)],
      ['create to succeeded', Number(rows[0]?.p99)],
    ],
    bounds,
  };
}

/** Partners `hooks-0` … with the receiver as their webhook; `hooks-0` has a customer for each server to suspend and resume. */
async function hookPartners(server: ServeProcess, receiver: WebhookReceiver, monitor: pg.Client): Promise<string> {
  let key = '';
  for (let r = 0; r < RECEIVERS; r++) {
    await operator(server, 'POST', '/partners', {
      id: `hooks-${r}`,
      display_name: 'Hooks',
      allow_private_webhooks: true,
      limits: { max_customers: 0, max_open_operations: 10_000, rate_limit_per_minute: 10_000_000, rate_limit_burst: 1_000_000 },
    });
    const partnerKey = String((await operator(server, 'POST', `/partners/hooks-${r}/keys`, {})).key);
    const api = await partnerClient(server, partnerKey);
    const configured = await api('PUT', '/webhook', { url: receiver.url() });
    if (configured.status >= 300) throw new Error(`PUT /webhook: ${configured.body}`);
    if (r > 0) continue;
    key = partnerKey;
    for (let i = 0; i < 3; i++)
      await api('POST', '/customers', { id: `wake-${i}`, owner: { username: 'o', email: `o@wake-${i}.example` } });
    await untilProvisioned(api);
  }
  // Their creations' deliveries are sent before any backlog is timed.
  while (Number((await monitor.query(`select count(*) as n from webhook_deliveries where state = 'pending'`)).rows[0]?.n) > 0)
    await sleep(20);
  return key;
}

/**
 * A backlog written while `servers` run, leased far ahead so that none claims it, then released at
 * once. Other processes' events reach a dispatcher at its once-a-second safety poll; each server is woken
 * at the release by an event of its own (a customer suspended or resumed through it), as a commit wakes
 * the process that made it.
 */
async function drain(
  monitor: Monitor,
  servers: ServeProcess[],
  env: Record<string, string>,
  receiver: WebhookReceiver,
  wake: { key: string; suspended: Set<string> },
): Promise<Figure> {
  const handle = await openServerDatabase(env);
  const events = new EventService({
    db: handle.db,
    cursors: new CursorCodec(randomBytes(32)),
    recorded: async (trx, event) => {
      await queueDelivery(trx as unknown as typeof handle.db, event);
    },
  });
  try {
    await handle.db.transaction().execute(async (trx) => {
      for (let j = 0; j < BACKLOG; j++) {
        await events.record(trx, {
          partnerId: `hooks-${j % RECEIVERS}`,
          mode: 'live',
          type: 'customer.suspended',
          at: new Date(),
          data: { customer_id: 'wake-0', state: 'suspended', suspended_at: new Date().toISOString(), workloads_running: 0 },
        });
      }
      await sql`update webhook_deliveries set lease_until = now() + interval '1 hour' where state = 'pending'`.execute(trx);
    });
  } finally {
    await handle.close();
  }
  const apis = await Promise.all(servers.map((server) => partnerClient(server, wake.key)));
  const before = receiver.deliveries.length;
  const expected = before + BACKLOG + servers.length;
  const retried = async () =>
    Number((await monitor.client.query<{ n: string }>(`select count(*) as n from webhook_deliveries where attempts > 1`)).rows[0]?.n);
  const retriedBefore = await retried();
  const stop = await watch(monitor, servers);
  const releasedAt = Date.now();
  await monitor.client.query(`update webhook_deliveries set lease_until = null where state = 'pending'`);
  await Promise.all(
    apis.map(async (api, i) => {
      const customer = `wake-${i}`;
      const answer = await api('POST', `/customers/${customer}/${wake.suspended.has(customer) ? 'resume' : 'suspend'}`, {});
      if (answer.status >= 300) throw new Error(`waking a server: ${answer.body}`);
      if (!wake.suspended.delete(customer)) wake.suspended.add(customer);
    }),
  );
  while (receiver.deliveries.length < expected) {
    if (Date.now() - releasedAt > 120_000)
      throw new Error(
        `the backlog was not delivered in 2 minutes: ${receiver.deliveries.length - before} of ${expected - before} received`,
      );
    await sleep(10);
  }
  const bounds = await stop();
  const received = receiver.deliveries
    .slice(before)
    .map((delivery) => delivery.receivedAtMs - releasedAt)
    .sort((a, b) => a - b);
  const lastMs = received[received.length - 1] ?? 1;
  const again = (await retried()) - retriedBefore;
  return {
    rate: ((BACKLOG + servers.length) * 1000) / lastMs,
    p99s: [['delivered after the release', percentile(received, 99)]],
    ...(again > 0 ? { trouble: `${again} deliveries retried` } : {}),
    bounds,
  };
}

/** One autocannon per server at once, the connections split between them: their throughputs summed, the slowest p99. */
async function loadAll(servers: ServeProcess[], tokens: string[], path: string, seconds: number) {
  const results = await Promise.all(
    servers.map((server, i) =>
      autocannon({
        url: `${server.partnerUrl}/api/public/v1${path}`,
        headers: { authorization: `Bearer ${tokens[i]}` },
        connections: Math.floor(CONNECTIONS / servers.length) + (i < CONNECTIONS % servers.length ? 1 : 0),
        duration: seconds,
      }),
    ),
  );
  return {
    rps: results.reduce((sum, r) => sum + r.requests.average, 0),
    p99: Math.max(...results.map((r) => r.latency.p99)),
    failed: results.reduce((sum, r) => sum + r.non2xx + r.errors + r.timeouts, 0),
  };
}

/** `GET /customers/{id}` over every server: a warm-up, then ROUNDS rounds, the median by throughput. */
async function reads(monitor: Monitor, servers: ServeProcess[], id: string, key: string): Promise<Figure> {
  const tokens = await Promise.all(servers.map((server) => partnerToken(server, key)));
  const path = `/customers/${id}-${Math.floor(CREATIONS / 2)}`;
  await loadAll(servers, tokens, path, 2);
  const stop = await watch(monitor, servers);
  const rounds: Awaited<ReturnType<typeof loadAll>>[] = [];
  for (let round = 0; round < ROUNDS; round++) rounds.push(await loadAll(servers, tokens, path, DURATION_S));
  const bounds = await stop();
  rounds.sort((a, b) => a.rps - b.rps);
  const median = rounds[Math.floor(rounds.length / 2)] as (typeof rounds)[number];
  return {
    rate: median.rps,
    p99s: [['the slowest process', median.p99]],
    ...(median.failed > 0 ? { trouble: `${median.failed} reads not 2xx` } : {}),
    bounds,
  };
}

type OnPostgres = (part: (env: Record<string, string>) => Promise<string[]>) => Promise<string[] | undefined>;

/**
 * The part on the bench's PostgreSQL server (`onPostgres`: a new database of its own), or with
 * BENCH_SCALE_OWN_POSTGRES=1 on a throwaway instance that preloads pg_stat_statements, removed at the end.
 */
export async function benchScale(label: string, onPostgres: OnPostgres): Promise<string[]> {
  if (process.env.BENCH_SCALE_OWN_POSTGRES !== '1') return (await onPostgres((env) => scale(label, env))) ?? [];
  const instance = await startPostgres({ shared_preload_libraries: "'pg_stat_statements'" });
  try {
    const admin = new pg.Client({ connectionString: instance.url() });
    await admin.connect();
    await admin.query('create database tenantry_bench');
    await admin.end();
    const env = { TENANTRY_DATA_DIR: join(scratchDir('data'), 'tenantry'), TENANTRY_DATABASE_URL: instance.url('tenantry_bench') };
    return await scale('PostgreSQL, own instance', env);
  } finally {
    await instance.remove();
  }
}

type Figures = Record<'creations' | 'deliveries' | 'reads', Figure>;

async function scale(label: string, env: Record<string, string>): Promise<string[]> {
  const serveEnv = benchServeEnv(env, { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE });
  const monitor = await openMonitor(env.TENANTRY_DATABASE_URL ?? '');
  const receiver = await new WebhookReceiver().listen();
  const figures: Figures[] = [];
  try {
    let wake: { key: string; suspended: Set<string> } | undefined;
    for (const count of [1, 3]) {
      const servers = await Promise.all(Array.from({ length: count }, () => spawnServe(serveEnv, { keepOutput: false })));
      try {
        const first = servers[0] as ServeProcess;
        wake ??= { key: await hookPartners(first, receiver, monitor.client), suspended: new Set() };
        // A partner a setting: a partner's sandbox address space holds 1,024 projects.
        const id = `scale-${count}`;
        const { key } = await benchPartner(first, id);
        figures.push({
          creations: await creations(monitor, servers, id, key),
          deliveries: await drain(monitor, servers, env, receiver, wake),
          reads: await reads(monitor, servers, id, key),
        });
      } finally {
        await Promise.all(servers.map((server) => server.stop()));
      }
    }
  } finally {
    await receiver.close();
    await monitor.client.end();
  }
  return scaleLines(label, figures, monitor.statements);
}

const WHAT: Record<keyof Figures, [string, string]> = {
  creations: [`customer creations finished, a burst of ${CREATIONS} spread over the processes`, 'creations/s'],
  deliveries: [`webhook deliveries, a backlog of ${BACKLOG} over ${RECEIVERS} receivers released at once`, 'deliveries/s'],
  reads: [`GET /customers/{id}, ${CONNECTIONS} connections split over the processes`, 'req/s'],
};

const fixed = (value: number) => value.toFixed(2);

function scaleLines(label: string, figures: Figures[], statements: boolean): string[] {
  const [one, three] = figures;
  if (!one || !three) return [];
  const lines = [
    `${label}: (l) scale: one tenantry serve process, then three on the same database; the processes, PostgreSQL and the bench's load all share this machine's ${cpus().length} cores`,
  ];
  for (const part of Object.keys(WHAT) as Array<keyof Figures>) {
    const [what, unit] = WHAT[part];
    const [a, b] = [one[part], three[part]];
    const p99s = a.p99s.map(([name, ms], i) => `${name} ${Math.round(ms)} / ${Math.round(b.p99s[i]?.[1] ?? Number.NaN)} ms`);
    const trouble = [a.trouble && `1 process: ${a.trouble}`, b.trouble && `3 processes: ${b.trouble}`].filter(Boolean);
    lines.push(
      `${label}: (l) ${what}: 1 process ${Math.round(a.rate)} ${unit}, 3 processes ${Math.round(b.rate)} ${unit} = ${fixed(b.rate / a.rate)} × one; ` +
        `p99 ${p99s.join(', ')}${trouble.length > 0 ? `; ${trouble.join(', ')}` : ''}`,
    );
  }
  for (const [i, setting] of figures.entries()) {
    for (const part of Object.keys(WHAT) as Array<keyof Figures>)
      lines.push(...boundsLines(`${label}: (l)`, `${part} with ${i === 0 ? '1 process' : '3 processes'}`, setting[part].bounds));
  }
  if (!statements)
    lines.push(
      `${label}: (l) the server does not load pg_stat_statements: no statements listed (BENCH_SCALE_OWN_POSTGRES=1 starts one that does)`,
    );
  return lines;
}
