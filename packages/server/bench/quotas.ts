/**
 * (h) `PUT /customers/{id}/quota` throughput: every change locks the customer, then the partner's
 * capacity allocation, so changes of one partner serialise and changes of different partners do not.
 *   - one partner: CONNECTIONS workers, each changing its own customer of that partner;
 *   - 50 partners: CONNECTIONS workers spread over 50 partners, one customer each.
 * Each worker knows its customer's revision (it is the only writer), so every refusal is a real
 * BUSY (the capacity lock was not free within its wait), counted apart from successes.
 */
import { type ServeProcess, spawnServe } from '../test/serve-process.ts';
import { benchServeEnv, operator, partnerToken, percentile } from './common.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const PARTNERS = 50;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Worker {
  token: string;
  customer: string;
  revision: number;
}

export async function benchQuotas(label: string, env: Record<string, string>): Promise<string[]> {
  const server = await spawnServe(benchServeEnv(env), { keepOutput: false });
  try {
    const tokens: string[] = [];
    for (let p = 0; p < PARTNERS; p++) {
      await operator(server, 'POST', '/partners', {
        id: `quota-${p}`,
        display_name: `Quota ${p}`,
        limits: { max_customers: 0, max_open_operations: 10_000, rate_limit_per_minute: 10_000_000, rate_limit_burst: 1_000_000 },
      });
      tokens.push(await partnerToken(server, String((await operator(server, 'POST', `/partners/quota-${p}/keys`, {})).key)));
    }
    // One partner's workers: CONNECTIONS customers of quota-0. Many partners' workers: one customer of each of the others.
    const single = await customers(
      server,
      Array.from({ length: CONNECTIONS }, (_, i) => ({ token: tokens[0] ?? '', id: `q0-${i}` })),
    );
    const spread = await customers(
      server,
      Array.from({ length: PARTNERS - 1 }, (_, i) => ({ token: tokens[i + 1] ?? '', id: `q${i + 1}-0` })),
    );
    return [
      await run(`${label}: (h) PUT quota, 1 partner, ${single.length} customers`, server, single),
      await run(`${label}: (h) PUT quota, ${spread.length} partners, 1 customer each`, server, spread.slice(0, CONNECTIONS)),
    ];
  } finally {
    await server.stop();
  }
}

async function customers(server: ServeProcess, wanted: { token: string; id: string }[]): Promise<Worker[]> {
  await Promise.all(
    wanted.map(({ token, id }) =>
      call(server, token, 'POST', '/customers', { id, plan_id: 'starter', owner: { username: 'owner', email: `owner@${id}.example` } }),
    ),
  );
  for (const { token, id } of wanted) {
    for (;;) {
      const customer = (await (await call(server, token, 'GET', `/customers/${id}`)).json()) as { data: { status: string } };
      if (customer.data.status === 'active') break;
      await sleep(10);
    }
  }
  return wanted.map(({ token, id }) => ({ token, customer: id, revision: 1 }));
}

async function run(name: string, server: ServeProcess, workers: Worker[]): Promise<string> {
  const latencies: number[] = [];
  const outcomes = new Map<string, number>();
  const deadline = performance.now() + DURATION_S * 1000;
  await Promise.all(
    workers.map(async (worker) => {
      while (performance.now() < deadline) {
        const started = performance.now();
        const vcpu = 1 + (worker.revision % 2);
        const response = await call(server, worker.token, 'PUT', `/customers/${worker.customer}/quota`, {
          revision: worker.revision,
          quota: { vcpu, memory_gib: 2, storage_gib: 20, gpus: {} },
        });
        const body = (await response.json()) as { error?: { code: string } };
        latencies.push(performance.now() - started);
        const outcome = response.status === 200 ? 'ok' : (body.error?.code ?? String(response.status));
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        if (response.status === 200) worker.revision++;
        // A BUSY worker comes back after 10 ms, not the advised second, to keep the lock contended.
        else if (outcome === 'BUSY') await sleep(10);
        else throw new Error(`${name}: unexpected ${response.status} ${JSON.stringify(body)}`);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const ok = outcomes.get('ok') ?? 0;
  const others = [...outcomes].filter(([k]) => k !== 'ok').map(([k, v]) => `${v} ${k}`);
  return (
    `${name}: ${Math.round(ok / DURATION_S)} changes/s, p50 ${percentile(latencies, 50).toFixed(1)} ms, ` +
    `p99 ${percentile(latencies, 99).toFixed(1)} ms${others.length ? ` (${others.join(', ')})` : ''}`
  );
}

function call(server: ServeProcess, token: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${server.partnerUrl}/api/public/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
}
