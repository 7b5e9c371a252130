import type { Scheduler } from '../../infra/scheduler.ts';
import { type BootstrapKube, describe } from '../kube.ts';
import { rolloutState, sleep } from '../wait.ts';

/**
 * Waits for each Deployment's rollout (`namespace/name`), side by side, reporting progress as one line; returns
 * `done`, or why not (failed, deleted, timed out), per Deployment.
 */
export async function waitForRollouts(
  kube: BootstrapKube,
  keys: string[],
  options: { scheduler: Scheduler; timeoutMs: number; pollMs: number },
  progress: (line: string) => void,
): Promise<Map<string, string>> {
  const waiting = new Map<string, string>(keys.map((key) => [key, 'restarting']));
  let done = 0;
  const report = () => {
    const open = [...waiting.entries()].map(([key, state]) => `${key}: ${state}`);
    progress(`resolvers: ${done} of ${keys.length} rolled out${open.length > 0 ? `; ${open.join(', ')}` : ''}`);
  };
  if (keys.length > 0) report();
  const results = await Promise.all(
    keys.map(async (key) => {
      const [namespace = '', name = ''] = key.split('/');
      const started = options.scheduler.nowMs();
      let last = 'restarting';
      let result: string;
      for (;;) {
        try {
          const state = rolloutState(await kube.getDeployment(namespace, name));
          if (state.done) {
            result = 'done';
            break;
          }
          if (state.failed) {
            result = `failed: ${state.message}`;
            break;
          }
          last = state.message;
        } catch (error) {
          last = `cannot read it: ${describe(error)}`;
        }
        waiting.set(key, last);
        report();
        if (options.scheduler.nowMs() - started >= options.timeoutMs) {
          result = `timed out after ${Math.round(options.timeoutMs / 1000)}s (${last})`;
          break;
        }
        await sleep(options.scheduler, options.pollMs);
      }
      waiting.delete(key);
      done += 1;
      report();
      return [key, result] as const;
    }),
  );
  return new Map(results);
}
