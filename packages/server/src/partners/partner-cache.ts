import { rememberBounded } from '../infra/bounded-map.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { findPartner, type PartnerRow } from './store.ts';
import type { PartnerTables } from './tables.ts';

/** At most this many partners are remembered per process; the oldest go first, so memory stays bounded. */
const MAX_ENTRIES = 10_000;

/**
 * The partner record as the authenticated hot path sees it. Entries live a
 * short, fixed time, so a suspension made by any process reaches every process
 * within that time; a change made by this process invalidates its entry at
 * once. Concurrent misses for one partner share one query.
 */
export class PartnerCache {
  readonly #db: Db<PartnerTables>;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #entries = new Map<string, { row: PartnerRow | undefined; fetchedAtMs: number }>();
  readonly #inflight = new Map<string, Promise<PartnerRow | undefined>>();

  constructor(db: Db<PartnerTables>, clock: Clock, ttlMs: number) {
    this.#db = db;
    this.#clock = clock;
    this.#ttlMs = ttlMs;
  }

  /** The cached record when it is fresh (`row` may be undefined: "no such partner"); undefined on a miss. */
  peek(id: string): { row: PartnerRow | undefined } | undefined {
    const entry = this.#entries.get(id);
    const nowMs = this.#clock.nowMs();
    return entry && nowMs - entry.fetchedAtMs < this.#ttlMs && nowMs >= entry.fetchedAtMs ? entry : undefined;
  }

  async get(id: string): Promise<PartnerRow | undefined> {
    const fresh = this.peek(id);
    if (fresh) return fresh.row;
    const nowMs = this.#clock.nowMs();
    let pending = this.#inflight.get(id);
    if (!pending) {
      pending = findPartner(this.#db, id).finally(() => this.#inflight.delete(id));
      this.#inflight.set(id, pending);
      const row = await pending;
      rememberBounded(this.#entries, id, { row, fetchedAtMs: nowMs }, MAX_ENTRIES);
      return row;
    }
    return pending;
  }

  invalidate(id: string): void {
    this.#entries.delete(id);
  }
}
