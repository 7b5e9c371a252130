import type { Logger } from 'pino';
import type { Clock } from '../infra/clock.ts';
import { Poller } from '../infra/poller.ts';
import type { Progress } from '../platform/platform.ts';

/** How long a request waits for the identity provider to report a new user ready. */
const CREATE_WAIT_MS = 10_000;

interface Waiter {
  ask: () => Promise<Progress>;
  /** The request's mode time, which the platform's `until` is measured against. */
  nowMs: number;
  /** When the wait ends, on the injectable clock. */
  deadlineMs: number;
  /** When to ask again (performance.now() time: a scheduling matter, like the poller's own timer). */
  nextAt: number;
  resolve: (progress: Progress) => void;
}

/**
 * Waits for the new users the identity provider reports in progress, so that no request handler sleeps. A
 * create asks the platform once; while the user is not ready, the request hands the wait to this background
 * loop (a Poller, as the operation engine and the webhook dispatcher run) and awaits its answer. The loop asks
 * again when the platform said the user would be ready (10 ms to a second apart) and answers each request
 * once its user is done or failed, or its wait has passed on the injectable clock. It runs only while
 * someone waits.
 */
export class UserReadiness {
  readonly #clock: Clock;
  readonly #poller: Poller;
  readonly #waiters = new Set<Waiter>();

  constructor(clock: Clock, logger: Logger) {
    this.#clock = clock;
    this.#poller = new Poller('user readiness', () => this.#pass(), logger);
  }

  /** The platform's answer once it is not `in_progress`, or the last one when the wait is over. */
  async wait(ask: () => Promise<Progress>, nowMs: number): Promise<Progress> {
    const safeAsk = () => ask().catch((err: unknown): Progress => ({ state: 'unavailable', reason: (err as Error).message }));
    const deadlineMs = this.#clock.nowMs() + CREATE_WAIT_MS;
    const first = await safeAsk();
    if (first.state !== 'in_progress' || this.#clock.nowMs() >= deadlineMs) return first;
    return new Promise<Progress>((resolve) => {
      const waiter = { ask: safeAsk, nowMs, deadlineMs, nextAt: nextAt(first, nowMs), resolve };
      this.#waiters.add(waiter);
      this.#poller.start(1_000);
      // Also when a pass is just ending: its end arms the timer for this wake.
      this.#poller.wakeIn(waiter.nextAt - performance.now());
    });
  }

  async #pass(): Promise<boolean> {
    const due = [...this.#waiters].filter((w) => w.nextAt <= performance.now());
    await Promise.all(
      due.map(async (waiter) => {
        const progress = await waiter.ask();
        if (progress.state !== 'in_progress' || this.#clock.nowMs() >= waiter.deadlineMs) {
          this.#waiters.delete(waiter);
          waiter.resolve(progress);
        } else waiter.nextAt = nextAt(progress, waiter.nowMs);
      }),
    );
    if (this.#waiters.size === 0) {
      // Idle: no timer is left armed (a request that waits next starts the loop again).
      void this.#poller.stop();
      return false;
    }
    const soonest = Math.min(...[...this.#waiters].map((w) => w.nextAt));
    this.#poller.wakeIn(soonest - performance.now());
    return false;
  }
}

/** When to ask again: when the platform said the user would be ready, 10 ms to a second from now. */
function nextAt(progress: Progress, nowMs: number): number {
  const until = progress.state === 'in_progress' ? progress.until.getTime() : nowMs;
  return performance.now() + Math.min(1_000, Math.max(10, until - nowMs));
}
