import type { V1Job } from '@kubernetes/client-node';
import type { Scheduler } from '../../infra/scheduler.ts';
import { type BootstrapKube, describe } from '../kube.ts';
import { jobState, sleep } from '../wait.ts';
import { parseMessage } from './job.ts';

interface JobRunOptions {
  scheduler: Scheduler;
  /** How long to wait for one Job to finish. */
  timeoutMs: number;
  pollMs: number;
  /** Keep Jobs that succeeded (failed ones are always kept, to read their logs). */
  keepJobs: boolean;
}

export type JobOutcome =
  | { ok: true; values: Map<string, string[]>; message: string }
  | { ok: false; error: string; values: Map<string, string[]>; kept: boolean };

const ENDED = (job: V1Job) =>
  job.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True') ?? false;

/**
 * Runs one node's Job to its end: replaces a finished Job of the same name left by an earlier run (a running
 * one means another run is under way: refused), creates it, polls it and its pod, and returns what the pod's
 * termination message said. Never throws: a failure is this node's outcome, not the others'.
 */
async function runJob(kube: BootstrapKube, job: V1Job, options: JobRunOptions, onProgress: (detail: string) => void): Promise<JobOutcome> {
  const namespace = job.metadata?.namespace ?? '';
  const name = job.metadata?.name ?? '';
  const fail = (error: string, kept = false, values = new Map<string, string[]>()): JobOutcome => ({ ok: false, error, values, kept });
  const started = options.scheduler.nowMs();
  const late = () => options.scheduler.nowMs() - started > options.timeoutMs;
  try {
    const previous = await kube.getJob(namespace, name);
    if (previous) {
      if (!ENDED(previous)) return fail(`a Job ${namespace}/${name} from another run is still running; wait for it or delete it`);
      onProgress('removing the Job of an earlier run');
      await kube.deleteJob(namespace, name);
      while (await kube.getJob(namespace, name)) {
        if (late()) return fail(`the Job ${namespace}/${name} of an earlier run is still being deleted`);
        await sleep(options.scheduler, options.pollMs);
      }
    }
    await kube.createJob(job);
  } catch (error) {
    return fail(`cannot create the Job ${namespace}/${name}: ${describe(error)}`);
  }
  let detail = 'created';
  for (;;) {
    try {
      const current = await kube.getJob(namespace, name);
      if (!current) return fail(`the Job ${namespace}/${name} was deleted while it ran`);
      const state = jobState(current, await kube.listPods(namespace, `batch.kubernetes.io/job-name=${name}`));
      if (state.phase === 'succeeded') {
        if (!options.keepJobs) await kube.deleteJob(namespace, name);
        return { ok: true, values: parseMessage(state.message), message: state.message };
      }
      if (state.phase === 'failed') {
        const values = parseMessage(state.message);
        const error =
          values.get('error')?.[0] ??
          (state.message
            .split('\n')
            .filter((l) => l.trim() !== '')
            .at(-1) ||
            'failed');
        return fail(
          `${error}${state.exitCode !== undefined ? ` (exit ${state.exitCode})` : ''}; see kubectl -n ${namespace} logs job/${name}`,
          true,
          values,
        );
      }
      detail = state.detail;
      onProgress(detail);
    } catch (error) {
      // A failed poll is retried until the deadline: the Job runs on regardless.
      detail = `cannot read the Job: ${describe(error)}`;
      onProgress(detail);
    }
    if (late())
      return fail(
        `did not finish within ${Math.round(options.timeoutMs / 1000)}s (${detail}); the Job ${namespace}/${name} is left for inspection`,
        true,
      );
    await sleep(options.scheduler, options.pollMs);
  }
}

/** Runs the Jobs side by side; `progress` gets one line summing them up whenever it changes. */
export async function runJobs(
  kube: BootstrapKube,
  jobs: Array<{ node: string; job: V1Job }>,
  options: JobRunOptions,
  progress: (line: string) => void,
  label: string,
): Promise<Map<string, JobOutcome>> {
  const states = new Map<string, string>(jobs.map(({ node }) => [node, 'starting']));
  let done = 0;
  const report = () => {
    const waiting = [...states.entries()].filter(([, s]) => s !== 'done').map(([node, s]) => `${node}: ${s}`);
    progress(`${label}: ${done} of ${jobs.length} nodes done${waiting.length > 0 ? `; ${waiting.join(', ')}` : ''}`);
  };
  report();
  const outcomes = await Promise.all(
    jobs.map(async ({ node, job }) => {
      const outcome = await runJob(kube, job, options, (detail) => {
        states.set(node, detail);
        report();
      });
      states.set(node, 'done');
      done += 1;
      report();
      return [node, outcome] as const;
    }),
  );
  return new Map(outcomes);
}
