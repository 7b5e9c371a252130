/**
 * (j) images: `GET /api/create-vm/{namespace}/os-images` from the cache (the console's hot read: a
 * session cookie, the namespace's owner, the catalogue's pre-serialised bytes, one log line) against a
 * bare node:http route answering the same bytes, in the same run. Goal: at least 0.8 of the bare route.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { spawnServe } from '../test/serve-process.ts';
import { benchServeEnv, loadInterleaved, operator, partnerToken, type Result } from './common.ts';

async function bareNode(): Promise<{ url: string; pid: number; stop(): void }> {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./bare-node-server.ts', import.meta.url))], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString('utf8')).url as string));
  });
  return { url, pid: child.pid ?? 0, stop: () => child.kill('SIGTERM') };
}

/**
 * A console session cookie of a customer's owner, as a browser gets it from a login link, and the
 * namespace of the customer's first project (named after the partner's customer prefix).
 */
async function consoleSession(server: Awaited<ReturnType<typeof spawnServe>>): Promise<{ cookie: string; namespace: string }> {
  await operator(server, 'POST', '/partners', {
    id: 'images-bench',
    display_name: 'Images bench',
    limits: { rate_limit_per_minute: 10_000_000, rate_limit_burst: 1_000_000 },
  });
  const token = await partnerToken(server, String((await operator(server, 'POST', '/partners/images-bench/keys', {})).key));
  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${server.partnerUrl}/api/public/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await response.json()) as { data: Record<string, unknown> };
  };
  await api('POST', '/customers', { id: 'bench', owner: { username: 'owner', email: 'owner@bench.example' } });
  let namespace = '';
  for (;;) {
    const customer = await api('GET', '/customers/bench');
    if (customer.data.status === 'active') {
      namespace = String((customer.data.projects as { namespace: string }[])[0]?.namespace);
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const login = await api('POST', '/customers/bench/users/owner/console-login');
  const opened = await fetch(String(login.data.url), { redirect: 'manual' });
  const cookie = (opened.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  // Every measured request must be the real answer: a wrong namespace would measure 404s.
  const check = await fetch(`${server.partnerUrl}/api/create-vm/${namespace}/os-images`, { headers: { cookie } });
  if (check.status !== 200) throw new Error(`os-images answered ${check.status}: ${await check.text()}`);
  return { cookie, namespace };
}

export async function benchImages(label: string, env: Record<string, string>): Promise<{ results: Result[]; notes: string[] }> {
  const bare = await bareNode();
  const server = await spawnServe(benchServeEnv(env), { keepOutput: false });
  let measured: Result[];
  try {
    const { cookie, namespace } = await consoleSession(server);
    // Interleaved rounds (bare, served, bare...): a neighbour's burst on a shared machine hits both sides.
    measured = await loadInterleaved([
      { name: '(j) bare node:http route', pid: bare.pid, options: { url: `${bare.url}/os-images` } },
      {
        name: `${label}: (j) GET os-images`,
        pid: server.child.pid ?? 0,
        options: { url: `${server.partnerUrl}/api/create-vm/${namespace}/os-images`, headers: { cookie } },
      },
    ]);
  } finally {
    bare.stop();
    await server.stop();
  }
  const baseline = measured[0] as Result;
  return {
    results: measured,
    notes: measured
      .slice(1)
      .map(
        (images) =>
          `${images.name} vs a bare node:http route: ${(images.rps / baseline.rps).toFixed(2)} by req/s (${images.rps} vs ${baseline.rps}), ` +
          `${(baseline.cpuUs / images.cpuUs).toFixed(2)} by server CPU per request (${images.cpuUs} vs ${baseline.cpuUs} µs) (goal: at least 0.8)`,
      ),
  };
}
