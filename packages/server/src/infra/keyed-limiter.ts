/**
 * At most `concurrency` tasks of a key run at once; the others wait in order of arrival. A task runs in
 * its caller's own asynchronous context (the caller awaits its turn, then runs it), so what the caller's
 * context carries (a request's idempotent answer, the transaction guard) stays the caller's.
 */
export class KeyedLimiter {
  readonly #concurrency: number;
  readonly #keys = new Map<string, { running: number; waiting: (() => void)[] }>();

  constructor(concurrency: number) {
    if (!(concurrency >= 1)) throw new Error('KeyedLimiter needs a concurrency of at least 1');
    this.#concurrency = concurrency;
  }

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    let state = this.#keys.get(key);
    if (!state) {
      state = { running: 0, waiting: [] };
      this.#keys.set(key, state);
    }
    if (state.running >= this.#concurrency) {
      const queue = state.waiting;
      await new Promise<void>((resolve) => queue.push(resolve));
    } else {
      state.running++;
    }
    try {
      return await task();
    } finally {
      // The slot passes straight to the next waiter, so a task arriving meanwhile cannot jump the queue.
      const next = state.waiting.shift();
      if (next) next();
      else if (--state.running === 0) this.#keys.delete(key);
    }
  }

  /** Tasks of `key` waiting for a slot (not those running). */
  waiting(key: string): number {
    return this.#keys.get(key)?.waiting.length ?? 0;
  }
}
