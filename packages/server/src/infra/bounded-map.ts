/**
 * Writes `value` as the newest entry of a cache map and drops the oldest entries beyond `max`. A Map
 * keeps its keys in the order they were first set, so an entry written again is deleted first to count
 * as new. The caches of the hot path use it so that a process that sees many keys, partners or sessions
 * over its life holds at most `max` of each, and their reads stay a single `get`.
 */
export function rememberBounded<K, V>(entries: Map<K, V>, key: K, value: V, max: number): void {
  entries.delete(key);
  entries.set(key, value);
  while (entries.size > max) {
    const oldest = entries.keys().next();
    if (oldest.done) break;
    entries.delete(oldest.value);
  }
}
