/**
 * (e) Operation throughput on the sandbox with no delay: `count` concurrent `POST /customers` (of one
 * partner, or spread over BENCH_PARTNERS), then until the engine has finished every `customer.create`.
 * Reports creates answered per second and operations completed per second (goal: 500 on PostgreSQL). `BENCH_ONLY=operations` runs this part
 * alone, on a server of its own: a first burst on the new server (its code not yet optimised by V8), then
 * a second, warm one (BENCH_WARM_BURST=0 leaves it out), each with where the machine's CPU went per customer
 * (the server, PostgreSQL's processes, the bench's own load). The api part runs one burst on its new
 * server (the customers it reads) and one on the warm server after the hot paths.
 */
import { spawnServe } from '../test/serve-process.ts';
import { type Answer, partnerClient } from './client.ts';
import { benchServeEnv, budgetText, cpuBudget, cpuBudgetPer, operator } from './common.ts';

const CREATIONS = Number(process.env.BENCH_CREATIONS ?? 1_000);
/** The partners the creations are spread over (BENCH_PARTNERS): one partner's creates take its row in turn. */
const PARTNERS = Number(process.env.BENCH_PARTNERS ?? 1);
if (!Number.isInteger(PARTNERS) || PARTNERS < 1)
  throw new Error(`BENCH_PARTNERS must be a whole number from 1, not ${process.env.BENCH_PARTNERS}`);
/** Whether the operations part repeats its burst on the warm server (BENCH_WARM_BURST=0: the first burst only). */
const WARM_BURST = process.env.BENCH_WARM_BURST !== '0';

type Api = (method: string, path: string, body?: unknown) => Promise<Answer>;

/**
 * Creates `<prefix>-0` … `<prefix>-<count-1>` at once, spread over the partners of `apis` in turn;
 * answers how many were not accepted (202).
 */
async function createAtOnce(apis: Api | Api[], prefix: string, count: number): Promise<number> {
  const all = Array.isArray(apis) ? apis : [apis];
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      (all[i % all.length] as Api)('POST', '/customers', {
        id: `${prefix}-${i}`,
        owner: { username: 'owner', email: `owner@${prefix}-${i}.example` },
      }).then((r) => r.status),
    ),
  );
  return answers.filter((status) => status !== 202).length;
}

/** Until none of the partner's customers is provisioning; then none may have failed (a rate of failures is no rate). */
export async function untilProvisioned(api: Api): Promise<void> {
  const first = async (status: string) =>
    (JSON.parse((await api('GET', `/customers?status=${status}&limit=1`)).body) as { data: { id: string }[] }).data[0];
  while (await first('provisioning')) await new Promise((resolve) => setTimeout(resolve, 10));
  const failed = await first('failed');
  if (failed) throw new Error(`the bench's creations failed (${failed.id} the first): its figures would measure failures`);
}

/**
 * Creates `burst-0` … `burst-<count-1>` at once (spread over the partners of `apis`) and waits for all
 * of them to be provisioned.
 */
export async function burstCreates(label: string, apis: Api | Api[], count: number): Promise<string> {
  const all = Array.isArray(apis) ? apis : [apis];
  const started = performance.now();
  const refused = await createAtOnce(all, 'burst', count);
  const acceptedMs = performance.now() - started;
  for (const api of all) await untilProvisioned(api);
  const doneMs = performance.now() - started;
  const over = all.length > 1 ? ` over ${all.length} partners` : '';
  return (
    `${label}: (e) ${count} concurrent creates${over}: all answered in ${Math.round(acceptedMs)} ms (${Math.round((count * 1000) / acceptedMs)} creates/s, ${refused} not 202); ` +
    `all operations succeeded after ${Math.round(doneMs)} ms (${Math.round((count * 1000) / doneMs)} operations completed/s; goal 500 on PostgreSQL)`
  );
}

/** A partner with room for `count` customers, and a function calling the partner API with its token. */
export async function benchPartner(server: Awaited<ReturnType<typeof spawnServe>>, id: string): Promise<{ api: Api; key: string }> {
  await operator(server, 'POST', '/partners', {
    id,
    display_name: 'Bench',
    limits: { max_customers: 0, max_open_operations: 10_000, rate_limit_per_minute: 10_000_000, rate_limit_burst: 1_000_000 },
  });
  // The default pool holds 500 standard customers; the bench makes more.
  await operator(server, 'PUT', `/partners/${id}/capacity`, {
    pool: { vcpu: 1_000_000, memory_gib: 4_000_000, storage_gib: 50_000_000 },
  });
  const key = String((await operator(server, 'POST', `/partners/${id}/keys`, {})).key);
  return { api: await partnerClient(server, key), key };
}

export async function benchOperations(label: string, env: Record<string, string>): Promise<string[]> {
  const workerEnv: Record<string, string> = process.env.BENCH_ENGINE_CONCURRENCY
    ? { TENANTRY_ENGINE_CONCURRENCY: process.env.BENCH_ENGINE_CONCURRENCY }
    : {};
  const lines: string[] = [];
  const server = await spawnServe(benchServeEnv(env, workerEnv), { keepOutput: false });
  try {
    const pid = server.child.pid ?? 0;
    // What a customer costs, from its create to its operation's end (the bench's polls included): first
    // on the new server, then again once V8 has optimised the path (the steady state of a running server).
    // Each burst has partners of its own: a partner's sandbox address space holds 1,024 projects.
    const bursts = WARM_BURST
      ? ([
          ['bench', 'new server'],
          ['warm', 'warm server'],
        ] as const)
      : ([['bench', '']] as const);
    for (const [name, when] of bursts) {
      const partners = await Promise.all(Array.from({ length: PARTNERS }, (_, i) => benchPartner(server, i === 0 ? name : `${name}-${i}`)));
      const apis = partners.map((partner) => partner.api);
      const before = cpuBudget(pid);
      const line = await burstCreates(when ? `${label}, ${when}` : label, apis, CREATIONS);
      lines.push(
        `${line}; ${budgetText(cpuBudgetPer(before, cpuBudget(pid), CREATIONS), 'a customer', Boolean(env.TENANTRY_DATABASE_URL))}`,
      );
    }
  } finally {
    await server.stop();
  }
  // The engine alone needs a second process on the same database: PostgreSQL's only (the embedded
  // database has one process, which refuses TENANTRY_ENGINE_CONCURRENCY=0).
  if (env.TENANTRY_DATABASE_URL) lines.push(await drainBacklog(label, env, workerEnv));
  return lines;
}

/**
 * (e2) The engine alone, on PostgreSQL: `CREATIONS` creations accepted by a process that runs no operations
 * (TENANTRY_ENGINE_CONCURRENCY=0), then a process that runs them starts on the same database, and
 * the time from its readiness until the last one succeeded gives the rate (the engine starts a few
 * milliseconds before the process listens, so the rate is slightly generous; the start-up is printed).
 */
async function drainBacklog(label: string, env: Record<string, string>, workerEnv: Record<string, string>): Promise<string> {
  const apiOnly = await spawnServe(benchServeEnv(env, { TENANTRY_ENGINE_CONCURRENCY: '0' }), { keepOutput: false });
  let key: string;
  try {
    const partner = await benchPartner(apiOnly, 'backlog');
    key = partner.key;
    const refused = await createAtOnce(partner.api, 'backlog', CREATIONS);
    if (refused > 0) throw new Error(`${refused} of the backlog's creates were not accepted`);
  } finally {
    await apiOnly.stop();
  }
  const spawned = performance.now();
  const worker = await spawnServe(benchServeEnv(env, workerEnv), { keepOutput: false });
  try {
    const ready = performance.now();
    const before = cpuBudget(worker.child.pid ?? 0);
    await untilProvisioned(await partnerClient(worker, key));
    const doneMs = performance.now() - ready;
    const per = cpuBudgetPer(before, cpuBudget(worker.child.pid ?? 0), CREATIONS);
    return (
      `${label}: (e2) a backlog of ${CREATIONS} creations (accepted by a process with TENANTRY_ENGINE_CONCURRENCY=0) drained by a process started on it ` +
      `in ${Math.round(doneMs)} ms after it was ready (${Math.round(ready - spawned)} ms to start): ${Math.round((CREATIONS * 1000) / doneMs)} operations completed/s ` +
      `(goal 500 on PostgreSQL); ${budgetText(per, 'an operation', true)}`
    );
  } finally {
    await worker.stop();
  }
}
