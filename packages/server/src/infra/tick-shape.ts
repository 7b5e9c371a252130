import { createHook } from 'node:async_hooks';

/**
 * Keeps the hidden classes of Node's `process.nextTick` queue entries alive for the life of the
 * process (decision 251).
 *
 * `process.nextTick` builds each entry as an object literal with computed keys
 * (`{ [async_id_symbol]: …, [trigger_async_id_symbol]: …, [kAsyncContextFrame]: …, callback, args }`),
 * and V8 remembers, at each of those keys, the hidden class (map) the entry had there. That memory is
 * all or nothing: one other map and the site is megamorphic for good, four of each later entry's five
 * properties then defined by calls into V8's runtime. The maps are held weakly, by the feedback and by the transitions that
 * lead to them; while nothing else refers to them (no entry queued, which is what an idle server looks
 * like) a few full collections free them (V8 keeps an unused map for two), and the next tick builds new
 * ones. In `tenantry serve` that happened some seconds after start, when the server was idle, and cost
 * about 2 µs of every later request's CPU: each request passes six or seven ticks through Node's own
 * request and socket streams. One entry kept here keeps its map and, through the maps' back pointers,
 * every map before it: the remembered maps never go, and the sites stay monomorphic.
 *
 * Answers whether an entry was found (an async hook's `init` is the one documented way to see one). If
 * a later Node builds its entries differently, what is kept is one small object nobody reads.
 */
export function keepTickShape(): boolean {
  if (kept !== undefined) return true;
  try {
    const hook = createHook({
      init(_id, type, _trigger, resource) {
        if (type === 'TickObject' && kept === undefined) kept = resource;
      },
    });
    hook.enable();
    try {
      process.nextTick(noop);
    } finally {
      hook.disable();
    }
  } catch {
    return false;
  }
  return kept !== undefined;
}

/** The entry kept: never read, only referred to. */
let kept: object | undefined;

const noop = () => {};
