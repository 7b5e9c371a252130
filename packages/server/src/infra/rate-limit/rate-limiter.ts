import { type Kysely, sql } from 'kysely';
import type { Clock } from '../clock.ts';
import { precompile } from '../db/precompiled.ts';
import { type BucketPolicy, describe, intervalMs, type RateDecision, step, toleranceMs } from './gcra.ts';
import type { RateLimitTables } from './tables.ts';

/** This module's own tables: infrastructure knows no domain module's. */
type Db = Kysely<RateLimitTables>;

/**
 * Token buckets that hold for the whole deployment. On PostgreSQL several
 * processes share them, so each decision is one atomic UPDATE of the bucket
 * row. The embedded database belongs to exactly one process, so there the
 * buckets live in that process's memory: the same decisions at no I/O cost.
 */
export interface RateLimiter {
  /** A decision, synchronous when no I/O was needed (the hot path avoids a promise then). */
  take(key: string, policy: BucketPolicy): RateDecision | Promise<RateDecision>;
}

export function createRateLimiter(db: Db, embedded: boolean, clock: Clock): RateLimiter {
  return embedded ? new MemoryRateLimiter(clock) : new SqlRateLimiter(db, clock);
}

/** Buckets of this process only, whatever the database: for limits that protect the process itself. */
export function createLocalRateLimiter(clock: Clock): RateLimiter {
  return new MemoryRateLimiter(clock);
}

class MemoryRateLimiter implements RateLimiter {
  readonly #tats = new Map<string, number>();
  readonly #clock: Clock;
  #lastSweepMs = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  take(key: string, policy: BucketPolicy): RateDecision {
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

/**
 * One atomic reservation of up to `want` tokens from a shared bucket: the same arithmetic as
 * gcra.step(), for several tokens at once, evaluated on the row under its lock. Compiled once
 * (decision 192): on PostgreSQL every token exchange runs it.
 */
const reserveTokens = precompile(
  (db: Db, key: string, nowMs: number, interval: number, capacity: number, want: number, refundMs: number) => {
    const base = sql<number>`greatest(rate_limits.tat_ms - ${refundMs}::float8, ${nowMs}::float8)`;
    const available = sql<number>`greatest(0, floor((${capacity}::float8 - (${base} - ${nowMs}::float8)) / ${interval}::float8))`;
    const granted = sql<number>`least(${want}::float8, ${available})`;
    return db
      .insertInto('rate_limits')
      .values({ key, tat_ms: sql<number>`${nowMs}::float8 + ${interval}::float8`, granted: 1 })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({
          granted,
          tat_ms: sql<number>`${base} + ${granted} * ${interval}::float8`,
        }),
      )
      .returning(['tat_ms', 'granted']);
  },
  6,
);

/** How long a process may hold tokens it reserved from a shared bucket. */
const LEASE_MS = 250;

interface Lease {
  /** Reserved tokens not yet used. */
  tokens: number;
  expiresAtMs: number;
  /** The shared bucket's remaining tokens right after the reservation. */
  sharedRemaining: number;
  /** Requests served from this lease: the size of the next reservation. */
  demand: number;
}

/**
 * Shared buckets in PostgreSQL. A process reserves tokens from the bucket row
 * (one atomic UPDATE) and spends them locally for at most LEASE_MS; the size
 * of a reservation follows the demand it saw, starting at one, so a quiet
 * partner is metered request by request and a busy one costs one UPDATE per
 * batch. Tokens are taken from the shared bucket before they are spent, so
 * the processes together never allow more than the bucket holds; tokens a
 * lease did not use are handed back with the next reservation.
 */
class SqlRateLimiter implements RateLimiter {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #leases = new Map<string, Lease>();
  readonly #reserving = new Map<string, Promise<void>>();

  constructor(db: Db, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  take(key: string, policy: BucketPolicy): RateDecision | Promise<RateDecision> {
    return this.#fromLease(key, policy) ?? this.#takeSlow(key, policy);
  }

  /** A token from this process's live lease, with no I/O. */
  #fromLease(key: string, policy: BucketPolicy): RateDecision | undefined {
    const lease = this.#leases.get(key);
    if (lease === undefined || lease.tokens <= 0 || this.#clock.nowMs() >= lease.expiresAtMs) return undefined;
    lease.tokens--;
    lease.demand++;
    return { allowed: true, limit: policy.perMinute, remaining: lease.sharedRemaining + lease.tokens, retryAfterS: 0 };
  }

  async #takeSlow(key: string, policy: BucketPolicy): Promise<RateDecision> {
    for (;;) {
      const fromLease = this.#fromLease(key, policy);
      if (fromLease) return fromLease;
      const nowMs = this.#clock.nowMs();
      const lease = this.#leases.get(key);
      const live = lease !== undefined && nowMs < lease.expiresAtMs;
      const pending = this.#reserving.get(key);
      if (pending) {
        await pending;
        continue;
      }
      let decision: RateDecision | undefined;
      const reservation = this.#reserve(key, policy, nowMs, lease, live).then((result) => {
        decision = result;
      });
      this.#reserving.set(key, reservation);
      try {
        await reservation;
      } finally {
        this.#reserving.delete(key);
      }
      if (decision) return decision;
    }
  }

  /**
   * Reserves tokens and spends the first one for the caller (so a slow query
   * can never leave it without an answer); the rest become the new lease.
   */
  async #reserve(key: string, policy: BucketPolicy, nowMs: number, lease: Lease | undefined, live: boolean): Promise<RateDecision> {
    const interval = intervalMs(policy);
    const tolerance = toleranceMs(policy);
    const maxBatch = Math.max(1, Math.min(100, Math.floor(policy.burst / 4)));
    const want = Math.min(maxBatch, live && lease ? lease.demand + 1 : 1);
    const refund = !live && lease ? lease.tokens : 0;
    const [row] = await reserveTokens(this.#db, key, nowMs, interval, tolerance + interval, want, refund * interval);
    if (!row) throw new Error('rate limit reservation returned no row');
    const tat = Number(row.tat_ms);
    const grantedNow = Number(row.granted);
    const after = describe(tat, nowMs, grantedNow > 0, policy);
    if (grantedNow === 0) {
      this.#leases.delete(key);
      return after;
    }
    // The lease runs from when the reservation arrived, not from when it was asked for.
    const tokens = grantedNow - 1;
    this.#leases.set(key, { tokens, expiresAtMs: this.#clock.nowMs() + LEASE_MS, sharedRemaining: after.remaining, demand: 1 });
    return { allowed: true, limit: policy.perMinute, remaining: after.remaining + tokens, retryAfterS: 0 };
  }
}
