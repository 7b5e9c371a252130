/**
 * (g) Webhook delivery, with a real HTTPS receiver on loopback (the test CA trusted through
 * TENANTRY_WEBHOOK_CA_FILE):
 *   - deliveries per second: a backlog of 10,000 recorded events, delivered and signed from a cold start;
 *   - delivery lag from state change to receipt, p50/p99, while suspends and resumes record
 *     BENCH_WEBHOOK_RATE events per second (default 500) for BENCH_WEBHOOK_LAG_S seconds (default 60).
 *     Goal: p99 under 1 s at 500 events a second. BENCH_WEBHOOK_SERIES=1 also prints the lag for each
 *     5 s of events.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { EventService } from '../src/events/service.ts';
import { CursorCodec } from '../src/infra/pagination/cursor.ts';
import { queueDelivery } from '../src/webhooks/store.ts';
import { spawnServe } from '../test/serve-process.ts';
import { TEST_CA_FILE, WebhookReceiver } from '../test/webhook-receiver.ts';
import { partnerClient } from './client.ts';
import { benchServeEnv, budgetText, cpuBudget, cpuBudgetPer, openServerDatabase, operator, percentile } from './common.ts';

const BACKLOG = Number(process.env.BENCH_WEBHOOK_BACKLOG ?? 10_000);
const LAG_S = Number(process.env.BENCH_WEBHOOK_LAG_S ?? 60);
/** Events a second while the lag is measured: the 500 by default. */
const RATE = Number(process.env.BENCH_WEBHOOK_RATE ?? 500);
const CUSTOMERS = 50;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function benchWebhooks(label: string, env: Record<string, string>): Promise<string[]> {
  const serveEnv = benchServeEnv(env, { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE });
  const receiver = await new WebhookReceiver().listen();
  const onPostgres = Boolean(env.TENANTRY_DATABASE_URL);
  let server = await spawnServe(serveEnv, { keepOutput: false });
  const notes: string[] = [];
  try {
    await operator(server, 'POST', '/partners', {
      id: 'hooks',
      display_name: 'Hooks',
      allow_private_webhooks: true,
      limits: { max_customers: 0, max_open_operations: 10_000, rate_limit_per_minute: 10_000_000, rate_limit_burst: 1_000_000 },
    });
    const key = String((await operator(server, 'POST', '/partners/hooks/keys', {})).key);
    // The generator's calls through a kept-alive client, a new one with each server (its port and token).
    let api = await partnerClient(server, key);
    const configured = await api('PUT', '/webhook', { url: receiver.url() });
    if (configured.status >= 300) throw new Error(`PUT /webhook: ${configured.body}`);
    for (let i = 0; i < CUSTOMERS; i++)
      await api('POST', '/customers', { id: `h${i}`, owner: { username: 'o', email: `o@h${i}.example` } });
    while (receiver.deliveries.length < CUSTOMERS) await sleep(20);

    // Deliveries per second: a backlog written while the server is down, delivered from a cold start.
    await server.stop();
    const handle = await openServerDatabase(env);
    // Recorded as the server records them: each event with its delivery, in one transaction.
    const events = new EventService({
      db: handle.db,
      cursors: new CursorCodec(randomBytes(32)),
      recorded: async (trx, event) => {
        await queueDelivery(trx as unknown as typeof handle.db, event);
      },
    });
    try {
      for (let i = 0; i < BACKLOG; i += 500) {
        await handle.db.transaction().execute(async (trx) => {
          for (let j = i; j < Math.min(BACKLOG, i + 500); j++) {
            await events.record(trx, {
              partnerId: 'hooks',
              mode: 'live',
              type: 'customer.suspended',
              at: new Date(),
              data: { customer_id: `h${j % CUSTOMERS}`, state: 'suspended', suspended_at: new Date().toISOString(), workloads_running: 0 },
            });
          }
        });
      }
    } finally {
      await handle.close();
    }
    const before = receiver.deliveries.length;
    server = await spawnServe(serveEnv, { keepOutput: false });
    const started = performance.now();
    const backlogCpu = cpuBudget(server.child.pid ?? 0);
    while (receiver.deliveries.length < before + BACKLOG) await sleep(20);
    const backlogMs = performance.now() - started;
    if (BACKLOG > 0)
      notes.push(
        `${label}: (g) ${BACKLOG} queued deliveries sent, signed and recorded in ${Math.round(backlogMs)} ms: ${Math.round((BACKLOG * 1000) / backlogMs)} deliveries/s; ` +
          budgetText(cpuBudgetPer(backlogCpu, cpuBudget(server.child.pid ?? 0), BACKLOG), 'a delivery', onPostgres),
      );

    // Lag at RATE events a second: each customer alternates suspend and resume, one call at a time.
    api = await partnerClient(server, key);
    const runStart = Date.now();
    const lagFrom = receiver.deliveries.length;
    const lagCpu = cpuBudget(server.child.pid ?? 0);
    const apiLatency: number[] = [];
    let recorded = 0;
    const worker = async (i: number) => {
      let suspended = false;
      const interval = (CUSTOMERS * 1000) / RATE;
      let next = runStart + (i * interval) / CUSTOMERS;
      while (Date.now() - runStart < LAG_S * 1000) {
        await sleep(Math.max(0, next - Date.now()));
        next += interval;
        const t = performance.now();
        const response = await api('POST', `/customers/h${i}/${suspended ? 'resume' : 'suspend'}`, {});
        apiLatency.push(performance.now() - t);
        if (response.status < 300) {
          suspended = !suspended;
          recorded++;
        }
      }
    };
    await Promise.all(Array.from({ length: CUSTOMERS }, (_, i) => worker(i)));
    const deadline = Date.now() + 30_000;
    while (receiver.deliveries.length < lagFrom + recorded && Date.now() < deadline) await sleep(50);
    const lags = receiver.deliveries
      .slice(lagFrom)
      .map((d) => d.receivedAtMs - Date.parse(d.body.created_at))
      .sort((a, b) => a - b);
    if (process.env.BENCH_WEBHOOK_SERIES) {
      // The lag by when its event happened, in windows of 5 s: a steady overload grows, a stall is a spike.
      const windows = new Map<number, number[]>();
      for (const d of receiver.deliveries.slice(lagFrom)) {
        const at = Date.parse(d.body.created_at);
        const w = Math.floor((at - runStart) / 5_000);
        const values = windows.get(w) ?? [];
        values.push(d.receivedAtMs - at);
        windows.set(w, values);
      }
      for (const [w, values] of [...windows].sort((a, b) => a[0] - b[0])) {
        values.sort((a, b) => a - b);
        notes.push(
          `${label}: (g) events at ${w * 5}-${w * 5 + 5} s: ${values.length}, lag p50 ${percentile(values, 50)} ms, p99 ${percentile(values, 99)} ms`,
        );
      }
    }
    const lagCpuPer = cpuBudgetPer(lagCpu, cpuBudget(server.child.pid ?? 0), Math.max(1, recorded));
    apiLatency.sort((a, b) => a - b);
    const overOneSecond = lags.filter((lag) => lag >= 1_000).length;
    notes.push(
      `${label}: (g) ${recorded} events in ${LAG_S} s (${Math.round(recorded / LAG_S)}/s), ${lags.length} delivered: ` +
        `lag p50 ${percentile(lags, 50)} ms, p99 ${percentile(lags, 99)} ms, max ${lags[lags.length - 1]} ms (goal: p99 under 1,000 ms); ` +
        `suspend/resume latency p50 ${percentile(apiLatency, 50).toFixed(1)} ms, p99 ${percentile(apiLatency, 99).toFixed(1)} ms; ` +
        budgetText(lagCpuPer, 'an event (its suspend or resume and its delivery)', onPostgres),
    );
    // What the tail is made of: deliveries that needed a retry (the first retry comes 1 s later) against
    // those that waited in the queue. The embedded database opens in one process only: the server stops first.
    await server.stop();
    const after = await openServerDatabase(env);
    try {
      const { rows } = await sql<{ retried: string; events: string }>`
        select count(*) filter (where attempts > 1) as retried, count(*) as events from webhook_deliveries
        where partner_id = 'hooks' and created_at >= ${new Date(runStart)}`.execute(after.db);
      notes.push(
        `${label}: (g) of the lag run's ${rows[0]?.events} events, ${rows[0]?.retried} needed more than one attempt; ${overOneSecond} delivered 1 s or more after their event`,
      );
    } finally {
      await after.close();
    }
    return notes;
  } finally {
    await server.stop();
    await receiver.close();
  }
}
