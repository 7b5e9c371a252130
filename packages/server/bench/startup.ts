/**
 * (k) Start-up and the CLI (BENCH_ONLY=startup; part of the default run): the installed `tenantry` command
 * (`node_modules/.bin/tenantry`, as a user's shell runs it) serving an existing embedded database, from
 * the spawn to the first 200 from `/readyz`; then `tenantry partners list` against that running server.
 * The readiness probe is polled every 20 ms from this process, as a kubelet's probe is: a `curl` process
 * every 20 ms takes enough of two cores to slow the start it measures.
 * BENCH_STARTS sets how many starts and commands (default 5).
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { spawnServe } from '../test/serve-process.ts';

const STARTS = Number(process.env.BENCH_STARTS ?? 5);
const COMMAND = fileURLToPath(new URL('../../../node_modules/.bin/tenantry', import.meta.url));
const POLL_MS = 20;

/** A loopback port free right now. */
async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** Milliseconds until `url` answers 200, polling every POLL_MS; fails after `timeoutMs`. */
async function untilReady(url: string, started: number, timeoutMs = 30_000): Promise<number> {
  while (performance.now() - started < timeoutMs) {
    const ok = await fetch(url, { signal: AbortSignal.timeout(1_000) }).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ok) return performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  throw new Error(`${url} was not ready within ${timeoutMs} ms`);
}

const summary = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const ms = (value: number | undefined) => `${Math.round(value ?? 0).toLocaleString('en')} ms`;
  return `median ${ms(sorted[Math.floor(sorted.length / 2)])} (${ms(sorted[0])} to ${ms(sorted.at(-1))}, ${sorted.length} runs)`;
};

export async function benchStartup(label: string, env: Record<string, string>): Promise<string[]> {
  // The database made by a first start, as an operator's restart finds it.
  const first = await spawnServe(env, { keepOutput: false });
  await first.stop();

  const starts: number[] = [];
  const commands: number[] = [];
  const ports = { partner: await freePort(), operator: await freePort() };
  const serveEnv = {
    ...process.env,
    ...env,
    TENANTRY_LISTEN: `127.0.0.1:${ports.partner}`,
    TENANTRY_OPERATOR_LISTEN: `127.0.0.1:${ports.operator}`,
  };
  for (let run = 0; run < STARTS; run++) {
    const started = performance.now();
    const child = spawn(COMMAND, ['serve'], { env: serveEnv, stdio: 'ignore' });
    const exited = once(child, 'exit');
    try {
      starts.push(await untilReady(`http://127.0.0.1:${ports.partner}/readyz`, started));
      if (run === STARTS - 1) {
        // The operator commands, against the server now running and settled (its schemas compiled, decision
        // 272); the CLI finds it through the data directory.
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        for (let command = 0; command < STARTS; command++) {
          const at = performance.now();
          await promisify(execFile)(COMMAND, ['partners', 'list'], { env: serveEnv });
          commands.push(performance.now() - at);
        }
      }
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  }
  return [
    `${label}: (k) start-up of the installed command on an existing embedded database to /readyz: ${summary(starts)}; goal 1,500 ms`,
    `${label}: (k) tenantry partners list against the running server: ${summary(commands)}; goal 500 ms`,
  ];
}
