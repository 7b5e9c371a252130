/**
 * (i) The SDK's cost on the caller's side: `GET /customers/{id}` at CONNECTIONS concurrent loops, once
 * with a bare `fetch` and a token, once through `@tenantry/sdk` (token cache, URL building, Idempotency
 * and retry bookkeeping, JSON). The difference in this process's CPU time per call is what the SDK adds.
 */
import { Tenantry } from '../../sdk/src/index.ts';
import { spawnServe } from '../test/serve-process.ts';
import { benchServeEnv, operator, partnerToken, percentile } from './common.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

async function measure(label: string, call: () => Promise<unknown>): Promise<{ line: string; cpuUs: number }> {
  const latencies: number[] = [];
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  const deadline = start + DURATION_S * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < deadline) {
        const t = performance.now();
        await call();
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  const cpuUs = (cpu.user + cpu.system) / latencies.length;
  latencies.sort((a, b) => a - b);
  const line = `${label}: ${Math.round(latencies.length / seconds)} calls/s, p50 ${percentile(latencies, 50).toFixed(2)} ms, p99 ${percentile(latencies, 99).toFixed(2)} ms, caller CPU ${cpuUs.toFixed(0)} µs/call`;
  return { line, cpuUs };
}

export async function benchSdk(label: string, env: Record<string, string>): Promise<string[]> {
  const server = await spawnServe(benchServeEnv(env), { keepOutput: false });
  try {
    await operator(server, 'POST', '/partners', {
      id: 'sdk-bench',
      display_name: 'SDK bench',
      limits: { rate_limit_per_minute: 10_000_000, rate_limit_burst: 1_000_000 },
    });
    const key = String((await operator(server, 'POST', '/partners/sdk-bench/keys', {})).key);
    const client = new Tenantry({ apiKey: key, baseUrl: server.partnerUrl });
    const { operation } = await client.customers.create({ id: 'bench-c', owner: { username: 'o', email: 'o@bench-c.example' } });
    await client.operations.wait('bench-c', operation.id, { intervalMs: 20 });
    const token = await partnerToken(server, key);
    const url = `${server.partnerUrl}/api/public/v1/customers/bench-c`;
    const raw = await measure(`${label}: (i) GET /customers/{id} with fetch`, async () => {
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      if (!response.ok) throw new Error(`GET answered ${response.status}`);
      return response.json();
    });
    const sdk = await measure(`${label}: (i) GET /customers/{id} with the SDK`, () => client.customers.get('bench-c'));
    return [
      raw.line,
      sdk.line,
      `${label}: (i) caller CPU per call, SDK minus fetch: ${(sdk.cpuUs - raw.cpuUs).toFixed(0)} µs (fetch itself dominates)`,
    ];
  } finally {
    await server.stop();
  }
}
