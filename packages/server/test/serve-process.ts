import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { MALLOC_ENV, NODE_FLAGS } from '../bin/process-settings.js';

/** The installed `tenantry` command's entry: what a user runs, compile cache included. */
const CLI = fileURLToPath(new URL('../bin/tenantry.js', import.meta.url));

export interface ServeProcess {
  child: ChildProcess;
  partnerUrl: string;
  operatorUrl: string;
  output(): string;
  /** Resolves once the output matches `pattern` (output kept); fails after `timeoutMs`. */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** The secret key of processes that share one PostgreSQL database in tests (production gives them one too). */
export const SHARED_TEST_SECRET_KEY = 'a1'.repeat(32);

/**
 * Runs `tenantry serve` as its own process and waits until both listeners are up. Processes on a
 * PostgreSQL server share one secret key, as a deployment's do; embedded ones keep theirs in their data directory.
 * `nodeFlags` replaces the Node flags `npm start` passes (the bench compares flags with it); `cli` runs
 * another checkout's `bin/tenantry.js` (the bench compares versions with it).
 */
export async function spawnServe(
  env: Record<string, string>,
  options: { keepOutput?: boolean; args?: string[]; nodeFlags?: readonly string[]; cli?: string } = {},
): Promise<ServeProcess> {
  let listening = false;
  const sharedKey = env.TENANTRY_DATABASE_URL ? { TENANTRY_SECRET_KEY: SHARED_TEST_SECRET_KEY } : {};
  // As `npm start` and the chart start it (bin/process-settings.js).
  const child = spawn(process.execPath, [...(options.nodeFlags ?? NODE_FLAGS), options.cli ?? CLI, 'serve', ...(options.args ?? [])], {
    env: {
      PATH: process.env.PATH ?? '',
      ...MALLOC_ENV,
      TENANTRY_LISTEN: '127.0.0.1:0',
      TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
      ...sharedKey,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const waiters = new Set<() => void>();
  const ready = new Promise<{ partnerUrl: string; operatorUrl: string }>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      if (listening && options.keepOutput === false) return;
      output += chunk.toString('utf8');
      for (const waiter of waiters) waiter();
      const line = output.split('\n').find((l) => l.includes('"tenantry serving"'));
      if (line) {
        const parsed = JSON.parse(line) as { partner_api: string; operator_api: string };
        listening = true;
        resolve({ partnerUrl: parsed.partner_api, operatorUrl: parsed.operator_api });
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      if (listening && options.keepOutput === false) return;
      output += chunk.toString('utf8');
      for (const waiter of waiters) waiter();
    });
    child.once('exit', (code) => reject(new Error(`tenantry serve exited with ${code}: ${output}`)));
  });
  const urls = await ready;
  return {
    child,
    ...urls,
    output: () => output,
    waitForOutput: (pattern, timeoutMs = 10_000) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no output matching ${pattern} within ${timeoutMs} ms: ${output}`));
        }, timeoutMs);
        const check = () => {
          if (!pattern.test(output)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      }),
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const [code] = (await once(child, 'exit')) as [number | null];
      return code;
    },
  };
}
