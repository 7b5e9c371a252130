/**
 * Timeouts and the caller's `AbortSignal`, for fetch runtimes. A caller may share one signal among many
 * concurrent calls: each signal gets one listener here, however many calls wait on it (Node 20 warns of a
 * leak past ten listeners on one signal).
 */
import { TenantryConnectionError, TenantryTimeoutError } from './errors.ts';

const subscribers = new WeakMap<AbortSignal, Set<() => void>>();

/** Runs `callback` when `signal` aborts; the returned function unsubscribes. */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let callbacks = subscribers.get(signal);
  if (!callbacks) {
    const created = new Set<() => void>();
    callbacks = created;
    subscribers.set(signal, created);
    signal.addEventListener(
      'abort',
      () => {
        for (const run of [...created]) run();
        created.clear();
      },
      { once: true },
    );
  }
  callbacks.add(callback);
  return () => callbacks.delete(callback);
}

/** Timers above this fire at once (setTimeout's 32-bit limit): such timeouts mean no timer at all. */
const MAX_TIMER_MS = 2_147_483_647;
const TIMED_OUT = Object.freeze({ reason: 'timeout' });

/**
 * One bounded request: `signal` aborts after `timeout` ms or when the caller's signal aborts. `fail`
 * turns what the runtime threw into what the caller sees: the caller's abort reason, a
 * `TenantryTimeoutError`, or a `TenantryConnectionError` for fetch's network errors (a `TypeError`).
 */
export interface Bounded {
  readonly signal: AbortSignal;
  /** Stops the timer and keeps the link to the caller's signal (a stream's body is read after this). */
  stopTimer(): void;
  /** Stops the timer and the link. */
  release(): void;
  fail(error: unknown): unknown;
}

export function bounded(request: { method: string; url: string; timeout: number }, caller: AbortSignal | undefined): Bounded {
  const controller = new AbortController();
  const timer = request.timeout <= MAX_TIMER_MS ? setTimeout(() => controller.abort(TIMED_OUT), request.timeout) : undefined;
  let unlink = () => {};
  if (caller?.aborted) controller.abort(caller.reason);
  else if (caller) unlink = onAbort(caller, () => controller.abort(caller.reason));
  return {
    signal: controller.signal,
    stopTimer: () => clearTimeout(timer),
    release() {
      clearTimeout(timer);
      unlink();
    },
    fail(error) {
      if (controller.signal.aborted) {
        const reason: unknown = controller.signal.reason;
        return reason === TIMED_OUT ? new TenantryTimeoutError(request) : reason;
      }
      return error instanceof TypeError ? new TenantryConnectionError({ method: request.method, url: request.url, cause: error }) : error;
    },
  };
}

/** Waits `ms` through `sleep`; rejects with the signal's reason as soon as it aborts. */
export function pause(sleep: (ms: number, signal?: AbortSignal) => Promise<void>, ms: number, signal?: AbortSignal): Promise<void> {
  if (!signal) return sleep(ms);
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const unsubscribe = onAbort(signal, () => reject(signal.reason));
    sleep(ms, signal).then(resolve, reject).finally(unsubscribe);
  });
}

/** The default `sleep`: a timer, cleared when the signal aborts so that nothing keeps the process alive. */
export function timerSleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    let unsubscribe = () => {};
    const timer = setTimeout(() => {
      unsubscribe();
      resolve();
    }, ms);
    if (signal) {
      unsubscribe = onAbort(signal, () => {
        clearTimeout(timer);
        resolve();
      });
    }
  });
}
