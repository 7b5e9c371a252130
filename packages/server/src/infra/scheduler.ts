import type { Clock } from './clock.ts';

/** A pending callback; `cancel` is safe to call more than once. */
export interface ScheduledTask {
  cancel(): void;
}

/**
 * A clock that can also run callbacks later. Background loops (probes, lease renewals, backoff) schedule
 * through it so that tests can move time by hand and wait for what became due, instead of sleeping.
 */
export interface Scheduler extends Clock {
  schedule(delayMs: number, task: () => void | Promise<void>): ScheduledTask;
}

export const systemScheduler: Scheduler = {
  nowMs: () => Date.now(),
  now: () => new Date(),
  schedule(delayMs, task) {
    const timer = setTimeout(() => {
      void Promise.resolve()
        .then(task)
        .catch(() => undefined);
    }, delayMs);
    return { cancel: () => clearTimeout(timer) };
  },
};

interface Pending {
  at: number;
  seq: number;
  task: () => void | Promise<void>;
  cancelled: boolean;
}

/**
 * Virtual time for tests. `advance(ms)` runs every task that falls due, in time order, and waits for each
 * one's promise (its network calls included) before the next: when it returns, everything due by then has
 * happened.
 */
export class ManualScheduler implements Scheduler {
  #ms: number;
  #seq = 0;
  readonly #pending: Pending[] = [];

  constructor(start: number = Date.UTC(2026, 0, 1)) {
    this.#ms = start;
  }

  nowMs(): number {
    return this.#ms;
  }

  now(): Date {
    return new Date(this.#ms);
  }

  schedule(delayMs: number, task: () => void | Promise<void>): ScheduledTask {
    const entry: Pending = { at: this.#ms + Math.max(0, delayMs), seq: this.#seq++, task, cancelled: false };
    this.#pending.push(entry);
    return {
      cancel: () => {
        entry.cancelled = true;
      },
    };
  }

  /** Moves time forward by `ms`, running what falls due on the way. */
  async advance(ms: number): Promise<void> {
    const until = this.#ms + ms;
    for (;;) {
      const next = this.#next(until);
      if (!next) break;
      this.#ms = Math.max(this.#ms, next.at);
      await next.task();
    }
    this.#ms = until;
  }

  /** Runs what is due now (tasks scheduled with no delay), without moving time. */
  runDue(): Promise<void> {
    return this.advance(0);
  }

  /** Tasks still waiting (not cancelled). */
  get pendingCount(): number {
    return this.#pending.filter((p) => !p.cancelled).length;
  }

  #next(until: number): Pending | undefined {
    let best: Pending | undefined;
    for (let i = this.#pending.length - 1; i >= 0; i--) {
      const p = this.#pending[i] as Pending;
      if (p.cancelled) {
        this.#pending.splice(i, 1);
        continue;
      }
      if (p.at <= until && (!best || p.at < best.at || (p.at === best.at && p.seq < best.seq))) best = p;
    }
    if (best) this.#pending.splice(this.#pending.indexOf(best), 1);
    return best;
  }
}
