import type { V1Deployment } from '@kubernetes/client-node';
import type { Scheduler } from '../../infra/scheduler.ts';
import { describe } from '../kube.ts';
import { rolloutState, sleep } from '../wait.ts';

/**
 * Waits for the rollouts of the Deployments named `namespace/name`, reporting progress as one line. Each
 * round is one list call (`list`, the query that found them), not one read per Deployment, so hundreds of
 * resolvers cost the API server one request a round. Returns `done`, or why not (failed, gone, timed out).
 */
export async function waitForRollouts(
  keys: string[],
  list: () => Promise<V1Deployment[]>,
  options: { scheduler: Scheduler; timeoutMs: number; pollMs: number },
  progress: (line: string) => void,
): Promise<Map<string, string>> {
  const results = new Map<string, string>();
  const waiting = new Map<string, string>(keys.map((key) => [key, 'restarting']));
  const report = () => {
    const open = [...waiting.entries()].map(([key, state]) => `${key}: ${state}`);
    progress(`resolvers: ${results.size} of ${keys.length} rolled out${open.length > 0 ? `; ${open.join(', ')}` : ''}`);
  };
  if (keys.length === 0) return results;
  report();
  const started = options.scheduler.nowMs();
  for (;;) {
    try {
      const found = new Map((await list()).map((d) => [`${d.metadata?.namespace}/${d.metadata?.name}`, d]));
      for (const key of [...waiting.keys()]) {
        const deployment = found.get(key);
        const state = deployment ? rolloutState(deployment) : undefined;
        if (!state) results.set(key, 'failed: the Deployment is gone');
        else if (state.done) results.set(key, 'done');
        else if (state.failed) results.set(key, `failed: ${state.message}`);
        else waiting.set(key, state.message);
        if (results.has(key)) waiting.delete(key);
      }
    } catch (error) {
      // A failed read is retried next round, until the deadline: the rollouts go on regardless.
      for (const key of waiting.keys()) waiting.set(key, `cannot read it: ${describe(error)}`);
    }
    report();
    if (waiting.size === 0) return results;
    if (options.scheduler.nowMs() - started >= options.timeoutMs) {
      for (const [key, last] of waiting) results.set(key, `timed out after ${Math.round(options.timeoutMs / 1000)}s (${last})`);
      return results;
    }
    await sleep(options.scheduler, options.pollMs);
  }
}
