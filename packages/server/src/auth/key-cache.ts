import { rememberBounded } from '../infra/bounded-map.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { AuthTables } from './tables.ts';

/** At most this many keys are remembered per process; the oldest go first. */
const MAX_ENTRIES = 10_000;

/** What verifying a token needs to know of the key it was exchanged with. */
export interface KeyFacts {
  partnerId: string;
  mode: KeyMode;
  createdAtMs: number;
  revokedAtMs: number | null;
  expiresAtMs: number | null;
}

/**
 * The API keys as the authenticated hot path sees them: a token names its
 * key, and the key must exist and match it. Entries live a short time (keys
 * are never deleted, and a revocation leaves issued tokens valid until they
 * expire, so a stale entry can only be lenient about tokens minted after a
 * revocation, which only a holder of the signing key could mint). Concurrent
 * misses for one key share one query.
 */
export class KeyCache {
  readonly #db: Db<AuthTables>;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #entries = new Map<string, { facts: KeyFacts | undefined; fetchedAtMs: number }>();
  readonly #inflight = new Map<string, Promise<KeyFacts | undefined>>();

  constructor(db: Db<AuthTables>, clock: Clock, ttlMs = 30_000) {
    this.#db = db;
    this.#clock = clock;
    this.#ttlMs = ttlMs;
  }

  peek(kid: string): { facts: KeyFacts | undefined } | undefined {
    const entry = this.#entries.get(kid);
    const nowMs = this.#clock.nowMs();
    return entry && nowMs - entry.fetchedAtMs < this.#ttlMs && nowMs >= entry.fetchedAtMs ? entry : undefined;
  }

  async get(kid: string): Promise<KeyFacts | undefined> {
    const fresh = this.peek(kid);
    if (fresh) return fresh.facts;
    let pending = this.#inflight.get(kid);
    if (!pending) {
      const fetchedAtMs = this.#clock.nowMs();
      pending = this.#read(kid)
        .then((facts) => {
          rememberBounded(this.#entries, kid, { facts, fetchedAtMs }, MAX_ENTRIES);
          return facts;
        })
        .finally(() => this.#inflight.delete(kid));
      this.#inflight.set(kid, pending);
    }
    return pending;
  }

  /** A change made by this process (a revocation) is seen by it at once. */
  invalidate(kid: string): void {
    this.#entries.delete(kid);
  }

  async #read(kid: string): Promise<KeyFacts | undefined> {
    const row = await this.#db
      .selectFrom('api_keys')
      .select(['partner_id', 'mode', 'created_at', 'revoked_at', 'expires_at'])
      .where('kid', '=', kid)
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      partnerId: row.partner_id,
      mode: row.mode,
      createdAtMs: row.created_at.getTime(),
      revokedAtMs: row.revoked_at?.getTime() ?? null,
      expiresAtMs: row.expires_at?.getTime() ?? null,
    };
  }
}
