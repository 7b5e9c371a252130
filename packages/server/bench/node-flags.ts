/**
 * BENCH_ONLY=flags: Node flags for `tenantry serve` compared head to head, on PostgreSQL.
 *
 * One server per set of flags in BENCH_NODE_FLAGS (sets separated by `|`, flags within a set by spaces;
 * an empty set is Node's defaults; by default the flags `npm start` passes against Node's defaults), all
 * started at once on one database, then loaded in turn round after round: `GET /customers/{id}` and
 * `GET /auth/whoami`. Separate servers measured one after another moved by more than a flag's effect on
 * this shared machine; loaded in alternation, a neighbour's burst falls on every set alike. Each set's
 * line gives its median round's CPU a request split by thread (the main thread, and V8's helper threads,
 * which do most of the collector's work in parallel) and its peak resident memory, and its CPU as a ratio
 * to the first set's. `BENCH_DURATION_S=2 BENCH_ROUNDS=10` gives a dozen comparisons in about three minutes.
 */
import { NODE_FLAGS } from '../bin/process-settings.js';
import { spawnServe } from '../test/serve-process.ts';
import { benchServeEnv, headToHead, partnerToken } from './common.ts';
import { benchPartner, burstCreates } from './operations.ts';

const FLAG_SETS = (process.env.BENCH_NODE_FLAGS ?? `${NODE_FLAGS.join(' ')}|`)
  .split('|')
  .map((set) => set.trim().split(/\s+/).filter(Boolean));

export async function benchNodeFlags(label: string, env: Record<string, string>): Promise<string[]> {
  const servers: Awaited<ReturnType<typeof spawnServe>>[] = [];
  try {
    for (const nodeFlags of FLAG_SETS) servers.push(await spawnServe(benchServeEnv(env), { keepOutput: false, nodeFlags }));
    const first = servers[0];
    if (!first) return [];
    // Processes on one database share its partners and customers, and accept each other's tokens.
    const partner = await benchPartner(first, 'bench');
    await burstCreates(label, partner.api, 1);
    const tokens = await Promise.all(servers.map((server) => partnerToken(server, partner.key)));
    const contenders = servers.map((server, i) => ({ server, token: tokens[i] ?? '', name: `with ${describe(FLAG_SETS[i] ?? [])}` }));
    return await headToHead(label, contenders, "the first set's");
  } finally {
    for (const server of servers) await server.stop();
  }
}

function describe(flags: readonly string[]): string {
  return flags.length === 0 ? "Node's defaults" : flags.join(' ');
}
