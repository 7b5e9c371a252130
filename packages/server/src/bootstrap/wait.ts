import type { V1Deployment, V1Job, V1Pod } from '@kubernetes/client-node';
import type { Scheduler } from '../infra/scheduler.ts';

/** Waits `ms` on the scheduler (virtual time in tests). */
export function sleep(scheduler: Scheduler, ms: number): Promise<void> {
  return new Promise((resolve) => scheduler.schedule(ms, resolve));
}

type RolloutState = { done: true } | { done: false; failed: boolean; message: string };

/**
 * Where a Deployment's rollout stands, by the rules `kubectl rollout status` uses: the controller has seen
 * the newest generation, every replica is updated, no old replica is left, and the updated ones are available.
 */
export function rolloutState(deployment: V1Deployment): RolloutState {
  const generation = deployment.metadata?.generation ?? 0;
  const status = deployment.status ?? {};
  if ((status.observedGeneration ?? 0) < generation)
    return { done: false, failed: false, message: 'waiting for the controller to see the change' };
  const progressing = status.conditions?.find((c) => c.type === 'Progressing');
  if (progressing?.reason === 'ProgressDeadlineExceeded')
    return { done: false, failed: true, message: `exceeded its progress deadline${progressing.message ? `: ${progressing.message}` : ''}` };
  const desired = deployment.spec?.replicas ?? 1;
  const updated = status.updatedReplicas ?? 0;
  const total = status.replicas ?? 0;
  const available = status.availableReplicas ?? 0;
  if (updated < desired) return { done: false, failed: false, message: `${updated} of ${desired} new replicas updated` };
  if (total > updated) return { done: false, failed: false, message: `${total - updated} old replicas pending termination` };
  if (available < updated) return { done: false, failed: false, message: `${available} of ${updated} updated replicas available` };
  return { done: true };
}

type JobState =
  | { phase: 'running'; detail: string }
  | { phase: 'succeeded'; message: string }
  | { phase: 'failed'; message: string; exitCode?: number };

/** A one-shot Job's state, with the termination message of its (last) pod's container. */
export function jobState(job: V1Job, pods: V1Pod[]): JobState {
  const latest = [...pods].sort((a, b) =>
    String(a.metadata?.creationTimestamp ?? '').localeCompare(String(b.metadata?.creationTimestamp ?? '')),
  );
  const pod = latest.at(-1);
  const container = pod?.status?.containerStatuses?.[0];
  const terminated = container?.state?.terminated;
  const message = (terminated?.message ?? '').trim();
  const condition = (type: string) => job.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
  if (condition('Complete')) return { phase: 'succeeded', message };
  if (condition('Failed')) {
    const reason = job.status?.conditions?.find((c) => c.type === 'Failed')?.reason;
    return {
      phase: 'failed',
      message: message || `the Job failed${reason ? ` (${reason})` : ''}`,
      ...(terminated ? { exitCode: terminated.exitCode } : {}),
    };
  }
  const waiting = container?.state?.waiting;
  if (waiting?.reason)
    return { phase: 'running', detail: `pod waiting: ${waiting.reason}${waiting.message ? ` (${waiting.message})` : ''}` };
  if (!pod) return { phase: 'running', detail: 'no pod yet' };
  return { phase: 'running', detail: `pod ${pod.status?.phase ?? 'Pending'}`.toLowerCase() };
}
