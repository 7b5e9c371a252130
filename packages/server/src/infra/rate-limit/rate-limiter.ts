import { sql } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/database.ts';
import { type BucketPolicy, describe, intervalMs, type RateDecision, step, toleranceMs } from './gcra.ts';

/**
 * Token buckets that hold for the whole deployment. On PostgreSQL several
 * processes share them, so each decision is one atomic UPDATE of the bucket
 * row. The embedded database belongs to exactly one process, so there the
 * buckets live in that process's memory: the same decisions at no I/O cost.
 */
export interface RateLimiter {
  take(key: string, policy: BucketPolicy): Promise<RateDecision>;
}

export function createRateLimiter(db: Db, embedded: boolean, clock: Clock): RateLimiter {
  return embedded ? new MemoryRateLimiter(clock) : new SqlRateLimiter(db, clock);
}

class MemoryRateLimiter implements RateLimiter {
  readonly #tats = new Map<string, number>();
  readonly #clock: Clock;
  #lastSweepMs = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  async take(key: string, policy: BucketPolicy): Promise<RateDecision> {
    const nowMs = this.#clock.nowMs();
    this.#sweep(nowMs);
    const next = step(this.#tats.get(key), nowMs, policy);
    this.#tats.set(key, next.tatMs);
    return describe(next.tatMs, nowMs, next.allowed, policy);
  }

  /** Forget buckets that are full again, so memory tracks only active callers. */
  #sweep(nowMs: number): void {
    if (nowMs - this.#lastSweepMs < 60_000) return;
    this.#lastSweepMs = nowMs;
    for (const [key, tat] of this.#tats) if (tat <= nowMs) this.#tats.delete(key);
  }
}

class SqlRateLimiter implements RateLimiter {
  readonly #db: Db;
  readonly #clock: Clock;

  constructor(db: Db, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  async take(key: string, policy: BucketPolicy): Promise<RateDecision> {
    const nowMs = this.#clock.nowMs();
    const interval = intervalMs(policy);
    const tolerance = toleranceMs(policy);
    // The same arithmetic as gcra.step(), evaluated on the row under its lock.
    const base = sql<number>`greatest(rate_limits.tat_ms, ${nowMs}::float8)`;
    const row = await this.#db
      .insertInto('rate_limits')
      .values({ key, tat_ms: nowMs + interval, allowed: true })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({
          allowed: sql<boolean>`${base} - ${nowMs}::float8 <= ${tolerance}::float8`,
          tat_ms: sql<number>`case when ${base} - ${nowMs}::float8 <= ${tolerance}::float8 then ${base} + ${interval}::float8 else ${base} end`,
        }),
      )
      .returning(['tat_ms', 'allowed'])
      .executeTakeFirstOrThrow();
    return describe(Number(row.tat_ms), nowMs, row.allowed, policy);
  }
}
