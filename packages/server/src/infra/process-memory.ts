import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How far V8 lets the heap grow past what the last full collection kept before it collects again (%). */
export const HEAP_GROWING_PERCENT = 50;

/**
 * Caps V8's heap growth at HEAP_GROWING_PERCENT. V8's own factor goes up to 4x for a heap that
 * collects quickly, so a server reading at a steady rate grows from 35 MB live to 130–145 MB of heap,
 * and its resident memory with it. V8 reads the flag each time it sets the limit, so it
 * is set here, at start; Node refuses it in `NODE_OPTIONS`, where the chart passes Node's flags.
 */
export function limitHeapGrowth(): void {
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

/**
 * One full, compacting collection once the server has started, of the kind V8 runs when memory is
 * short ("last resort"): start-up's garbage goes, and the pages it held and the young generation the
 * start-up grew go back to the system. V8's own memory reducer collects the same garbage
 * about 20 s later but keeps the pages. Answers how long it took (ms), or undefined when V8 has no
 * collection to offer.
 *
 * The collection is V8's `gc` extension, installed only in a context created after the flag is set:
 * the application's own context never gets a global `gc`.
 */
export function releaseStartupMemory(): number | undefined {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('typeof gc === "function" ? gc : undefined') as
    | ((options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void)
    | undefined;
  setFlagsFromString('--no-expose-gc');
  if (!gc) return undefined;
  const started = performance.now();
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return performance.now() - started;
}

/**
 * Resolves true at the end of the first `windowMs` in which the event loop was busy less than `below` of
 * the time (its utilization, as Node measures it): nothing is asking this process for much. Resolves
 * false if `signal` aborts first. What waits for it (start-up's collection) then does not
 * land in the middle of a burst of requests that began as the server came up.
 */
export function whenQuiet(options: { windowMs?: number; below?: number; signal?: AbortSignal } = {}): Promise<boolean> {
  const { windowMs = 250, below = 0.1, signal } = options;
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    let last = performance.eventLoopUtilization();
    const timer = setInterval(() => {
      const now = performance.eventLoopUtilization();
      const window = performance.eventLoopUtilization(now, last);
      last = now;
      if (window.utilization < below) finish(true);
    }, windowMs).unref();
    const finish = (quiet: boolean) => {
      clearInterval(timer);
      signal?.removeEventListener('abort', aborted);
      resolve(quiet);
    };
    const aborted = () => finish(false);
    signal?.addEventListener('abort', aborted, { once: true });
  });
}
