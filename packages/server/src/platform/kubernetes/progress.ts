import { upstreamFailure } from '../failures.ts';
import { type AddressRange, type PlatformContext, PlatformUnavailableError, type Progress } from '../platform.ts';
import { identityStatus } from './keycloak.ts';
import { kubeMessage, kubeStatus } from './kube.ts';

export const DONE: Progress = { state: 'done' };

/** How soon the engine looks again at work the cluster is still doing. */
export const POLL_MS = 2000;

export function later(ctx: PlatformContext, ms = POLL_MS): Progress {
  return { state: 'in_progress', until: new Date(ctx.now.getTime() + ms) };
}

/** Statuses that say "not now" rather than "no": the step is looked at again, nothing fails. */
const TRANSIENT = new Set([0, 408, 409, 425, 429, 500, 502, 503, 504]);

/** The HTTP status behind an error from either API; undefined for anything else (a bug). */
export function statusOf(error: unknown): number | undefined {
  return kubeStatus(error) ?? identityStatus(error);
}

/**
 * The failure vocabulary for a platform error (docs/platform-kubernetes.md, "Failure codes"): no answer,
 * a conflict, a throttle or a 5xx is `unavailable` (looked at again); a 404 of an object the step needs is
 * UPSTREAM_NOT_FOUND; any other refusal is UPSTREAM_<status>. Anything that is no API error is rethrown.
 */
export function refusal(error: unknown, step: string): Progress {
  const status = statusOf(error);
  if (status === undefined) throw error;
  const message = `${step}: ${kubeMessage(error)}`;
  if (TRANSIENT.has(status)) return { state: 'unavailable', reason: message, retryAfterMs: status === 429 ? 10_000 : POLL_MS };
  return { state: 'failed', code: upstreamFailure(status), message: message.slice(0, 500) };
}

/** Runs a step, turning platform errors into its Progress. */
export async function guard(step: string, run: () => Promise<Progress>): Promise<Progress> {
  try {
    return await run();
  } catch (error) {
    return refusal(error, step);
  }
}

/** The same for the address-range step, whose `done` carries the range. */
export async function guardRange(step: string, run: () => Promise<AddressRange>): Promise<AddressRange> {
  try {
    return await run();
  } catch (error) {
    return refusal(error, step) as Exclude<Progress, { state: 'done' }>;
  }
}

/** For calls that answer a request directly (workloads, GPUs): any platform error is 503 UNAVAILABLE. */
export async function orUnavailable<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    const status = statusOf(error);
    if (status === undefined) throw error;
    throw new PlatformUnavailableError(
      `${what}: the platform answered ${status === 0 ? 'nothing' : `HTTP ${status}`}. Retry later.`,
      status === 429 ? 10 : 5,
    );
  }
}

type Condition = Record<string, unknown>;

function conditionsOf(object: { status?: Record<string, unknown> }): Condition[] {
  return (object.status?.conditions as Condition[] | undefined) ?? [];
}

/**
 * A Kube-DC object's state as the driver judges it: `status.ready` (docs/platform/project-resources.md);
 * `LimitCheck` False is the one refusal Kube-DC reports on an object it keeps (a Project past the
 * organization's project limit); a Ready condition False with an error reason for the current spec is a
 * reconcile that cannot go on. Anything else that never becomes ready ends in the 15-minute timeout.
 */
export function readiness(object: { metadata: { generation?: number }; status?: Record<string, unknown> }): 'ready' | 'failed' | 'pending' {
  const status = object.status ?? {};
  const conditions = conditionsOf(object);
  if (conditions.some((c) => c.type === 'LimitCheck' && c.status === 'False')) return 'failed';
  const ready = conditions.find((c) => c.type === 'Ready');
  if (status.ready === true && (ready === undefined || ready.status === 'True')) return 'ready';
  const current = ready?.observedGeneration === undefined || ready.observedGeneration === object.metadata.generation;
  if (ready?.status === 'False' && current && /Error|Fail|Invalid|Disabled|Refused/.test(String(ready.reason ?? ''))) return 'failed';
  return 'pending';
}

/** What Kube-DC says of it: the first False condition (LimitCheck first), as `type reason: message`. */
export function readyMessage(object: { status?: Record<string, unknown> }): string {
  const conditions = conditionsOf(object);
  const failing =
    conditions.find((c) => c.type === 'LimitCheck' && c.status === 'False') ??
    conditions.find((c) => c.status === 'False') ??
    conditions.find((c) => c.type === 'Ready');
  if (!failing) return 'NotReady';
  return `${String(failing.type)} ${String(failing.reason ?? '')}: ${String(failing.message ?? '')}`.slice(0, 500);
}
