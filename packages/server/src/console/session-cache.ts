import { hash } from 'node:crypto';
import { rememberBounded } from '../infra/bounded-map.ts';
import type { Clock } from '../infra/clock.ts';
import type { ConsoleService, ConsoleSession } from './service.ts';

/** At most this many sessions are remembered per process; the oldest go first. */
const MAX_ENTRIES = 10_000;

/**
 * The console session behind a cookie, for the console's read-only hot path (the OS image list the form
 * asks for on every page). A session found is remembered for a short, fixed time (TENANTRY_PARTNER_CACHE_MS,
 * at most 5 s), like a partner record: a sign-out, revocation or suspension reaches this read within that
 * time. Writes (creating a VM) and pages always read the session fresh. Unknown cookies
 * are never remembered, so a guessed cookie costs a database read each time, as elsewhere.
 */
export class ConsoleSessionCache {
  readonly #console: ConsoleService;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #entries = new Map<string, { session: ConsoleSession; atMs: number }>();

  constructor(deps: { console: ConsoleService; clock: Clock; ttlMs: number }) {
    this.#console = deps.console;
    this.#clock = deps.clock;
    this.#ttlMs = deps.ttlMs;
  }

  /** The session when it is remembered and fresh; undefined otherwise (then ask `session`). */
  peek(sessionId: string): ConsoleSession | undefined {
    const entry = this.#entries.get(keyOf(sessionId));
    const nowMs = this.#clock.nowMs();
    return entry && nowMs - entry.atMs < this.#ttlMs && nowMs >= entry.atMs ? entry.session : undefined;
  }

  /** Forgets a session that ended here (a sign-out): this process stops honouring it at once. */
  forget(sessionId: string): void {
    this.#entries.delete(keyOf(sessionId));
  }

  async session(sessionId: string | undefined): Promise<ConsoleSession | undefined> {
    if (!sessionId) return undefined;
    const fresh = this.peek(sessionId);
    if (fresh) return fresh;
    const key = keyOf(sessionId);
    const nowMs = this.#clock.nowMs();
    const session = await this.#console.session(sessionId);
    if (!session) {
      this.#entries.delete(key);
      return undefined;
    }
    if (this.#ttlMs > 0) {
      rememberBounded(this.#entries, key, { session, atMs: nowMs }, MAX_ENTRIES);
    }
    return session;
  }
}

/** Entries are keyed by a hash: the cache never holds a usable cookie. */
function keyOf(sessionId: string): string {
  return hash('sha256', sessionId, 'base64url');
}
