import { CompiledQuery, type Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
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
  /**
   * A reservation for the caller's next statement to carry, saving take()'s round trip; undefined
   * when take() needs no I/O (buckets in this process's memory, or a live lease).
   */
  carry(key: string, policy: BucketPolicy): CarriedReservation | undefined;
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

  carry(): undefined {
    return undefined;
  }

  /** Forget buckets that are full again, so memory tracks only active callers. */
  #sweep(nowMs: number): void {
    if (nowMs - this.#lastSweepMs < 60_000) return;
    this.#lastSweepMs = nowMs;
    for (const [key, tat] of this.#tats) if (tat <= nowMs) this.#tats.delete(key);
  }
}

/**
 * One atomic reservation from the shared bucket `$1` at `$2` ms (one token every `$3` ms, `$4` ms of
 * capacity), after handing back `$6` ms an expired lease did not use: the same arithmetic as
 * gcra.step(), for several tokens at once, evaluated on the row under its lock. It grants `$5` tokens
 * (a lease sized by the caller's demand) while the bucket keeps at least half its burst after them;
 * below that only `$7`, the requests waiting for them now, so that no process holds tokens it may not
 * spend while another answers 429. With a `source` (a relation of an enclosing statement), it happens
 * once per row of it, so a statement that reads something can reserve in the same round trip only if
 * what it read allows it; its own values start at `$8`. Returns `tat_ms, granted`.
 */
export function reservationSql(source?: string): string {
  const base = 'greatest(rate_limits.tat_ms - $6::float8, $2::float8)';
  const available = `greatest(0, floor(($4::float8 - (${base} - $2::float8)) / $3::float8))`;
  const granted = `least(${available}, case when ${available} - $5::float8 >= $4::float8 / $3::float8 / 2 then $5::float8 else $7::float8 end)`;
  return (
    `insert into rate_limits (key, tat_ms, granted) select $1::text, $2::float8 + $3::float8, 1${source ? ` from ${source}` : ''} ` +
    `on conflict (key) do update set granted = ${granted}, tat_ms = ${base} + ${granted} * $3::float8 returning tat_ms, granted`
  );
}

const RESERVE = reservationSql();

/** What a reservation returned: the bucket's new theoretical arrival time and the tokens it granted. */
export interface ReservedRow {
  tat_ms: number | string;
  granted: number | string;
}

/**
 * A reservation a caller's own statement carries (see reservationSql): `values` are its `$1`…`$7`;
 * `settle` takes the row the reservation returned (undefined: the statement did not reserve) and
 * answers the decision, or undefined when there was none to make (then call take()).
 */
export interface CarriedReservation {
  values: readonly unknown[];
  settle(row: ReservedRow | undefined): RateDecision | undefined;
}

/** How long a process may hold tokens it reserved from a shared bucket. */
const LEASE_MS = 250;
/**
 * The most tokens one reservation takes (and never more than a quarter of the burst). At 100, a
 * partner sending 40,000 requests a second costs 400 reservations a second, 3-4% of the server's
 * CPU; at 1,000, 40.
 */
export const MAX_RESERVATION = 1_000;
/**
 * A lease of at least this many tokens is renewed before it runs out: when a quarter of it is left, a
 * reservation is sent while the rest is spent, so a busy caller never waits for one.
 */
const RENEW_FROM = 64;

interface Lease {
  /** Reserved tokens not yet used. */
  tokens: number;
  expiresAtMs: number;
  /** The shared bucket's remaining tokens right after the reservation. */
  sharedRemaining: number;
  /** The shared bucket's theoretical arrival time right after the reservation. */
  tatMs: number;
  /** Requests served from this lease: the size of the next reservation. */
  demand: number;
  /** At this many tokens left, the next reservation is sent ahead of need (-1: never). */
  renewAt: number;
}

/** When a lease of `granted` tokens asks for its successor. */
function renewalPoint(granted: number): number {
  return granted >= RENEW_FROM ? Math.floor(granted / 4) : -1;
}

/**
 * Shared buckets in PostgreSQL. A process reserves tokens from the bucket row
 * (one atomic UPDATE) and spends them locally for at most LEASE_MS; the size
 * of a reservation follows the demand it saw, starting at one and doubling
 * while leases are spent before they expire, so a quiet partner is metered
 * request by request and a busy one costs one UPDATE per batch. A large lease
 * asks for its successor when a quarter of it is left, so a busy caller's
 * requests keep being answered from memory while the reservation travels.
 * Tokens are taken from the shared bucket before they are spent, so the
 * processes together never allow more than the bucket holds; tokens a lease
 * did not use are handed back with the next reservation.
 */
class SqlRateLimiter implements RateLimiter {
  readonly #db: Db;
  readonly #clock: Clock;
  readonly #leases = new Map<string, Lease>();
  readonly #reserving = new Map<string, Promise<void>>();
  /** Requests of this process waiting for a bucket's reservation under way. */
  readonly #waiting = new Map<string, number>();

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
    if (lease === undefined || lease.tokens <= 0) return undefined;
    const nowMs = this.#clock.nowMs();
    if (nowMs >= lease.expiresAtMs) return undefined;
    lease.tokens--;
    lease.demand++;
    if (lease.tokens === lease.renewAt) this.#renew(key, policy, nowMs, lease);
    const remaining = Math.min(policy.burst, lease.sharedRemaining + lease.tokens);
    return { allowed: true, limit: policy.perMinute, remaining, retryAfterS: 0 };
  }

  async #takeSlow(key: string, policy: BucketPolicy): Promise<RateDecision> {
    for (;;) {
      const fromLease = this.#fromLease(key, policy);
      if (fromLease) return fromLease;
      const nowMs = this.#clock.nowMs();
      const lease = this.#leases.get(key);
      const pending = this.#reserving.get(key);
      if (pending) {
        this.#waiting.set(key, (this.#waiting.get(key) ?? 0) + 1);
        try {
          await pending;
        } finally {
          const left = (this.#waiting.get(key) ?? 1) - 1;
          if (left === 0) this.#waiting.delete(key);
          else this.#waiting.set(key, left);
        }
        continue;
      }
      let decision: RateDecision | undefined;
      const reservation = this.#reserve(key, policy, nowMs, lease).then((result) => {
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

  carry(key: string, policy: BucketPolicy): CarriedReservation | undefined {
    const nowMs = this.#clock.nowMs();
    const lease = this.#leases.get(key);
    // A reservation under way (take() waits for it), or a lease that answers with no I/O.
    if (this.#reserving.has(key) || (lease !== undefined && lease.tokens > 0 && nowMs < lease.expiresAtMs)) return undefined;
    const values = this.#plan(key, policy, nowMs, lease, 1);
    return {
      values,
      settle: (row) => {
        if (row) return this.#settle(key, policy, nowMs, row);
        // Nothing reserved: an expired lease's unused tokens are still to be handed back.
        if (lease && !this.#leases.has(key)) this.#leases.set(key, lease);
        return undefined;
      },
    };
  }

  /**
   * The values of a reservation: as many tokens as the live lease's demand (one without a lease), or
   * when the bucket is low only the `need` of this process's requests waiting now, handing back what an expired lease did not use. That lease is forgotten here, so two reservations
   * made at once hand its tokens back only once. What is handed back is no more than what is left of
   * the lease's charge in the bucket: a lease left unspent for an hour hands back nothing, since the
   * bucket has refilled meanwhile and the tokens would be allowed twice.
   */
  #plan(key: string, policy: BucketPolicy, nowMs: number, lease: Lease | undefined, need: number): unknown[] {
    const live = lease !== undefined && nowMs < lease.expiresAtMs;
    const interval = intervalMs(policy);
    const maxBatch = Math.max(1, Math.min(MAX_RESERVATION, Math.floor(policy.burst / 4)));
    // A lease spent before it ran out asks for twice as many: a busy caller reaches the cap in ten
    // reservations, where one more token a time took a thousand. An expired lease starts again at one.
    // (A renewal counts the tokens still left as spent: they will be, before its answer is needed.)
    const want = Math.max(need, Math.min(maxBatch, live && lease ? 2 * (lease.demand + lease.tokens) : 1));
    const refundMs = !live && lease ? Math.min(lease.tokens * interval, Math.max(0, lease.tatMs - nowMs)) : 0;
    if (!live && lease) this.#leases.delete(key);
    return [key, nowMs, interval, toleranceMs(policy) + interval, want, refundMs, need];
  }

  /** Reserves tokens and spends the first one for the caller; the rest become the new lease. */
  async #reserve(key: string, policy: BucketPolicy, nowMs: number, lease: Lease | undefined): Promise<RateDecision> {
    // This request and the ones queued behind the reservation that was under way.
    const values = this.#plan(key, policy, nowMs, lease, 1 + (this.#waiting.get(key) ?? 0));
    const [row] = (await this.#db.executeQuery<ReservedRow>(CompiledQuery.raw(RESERVE, values))).rows;
    if (!row) throw new Error('rate limit reservation returned no row');
    return this.#settle(key, policy, nowMs, row);
  }

  /** The decision a reservation's row gives (the first token is the caller's, so a slow query can never leave it without an answer). */
  #settle(key: string, policy: BucketPolicy, nowMs: number, row: ReservedRow): RateDecision {
    const tat = Number(row.tat_ms);
    const grantedNow = Number(row.granted);
    const after = describe(tat, nowMs, grantedNow > 0, policy);
    if (grantedNow === 0) {
      this.#leases.delete(key);
      return after;
    }
    // The lease runs from when the reservation arrived, not from when it was asked for.
    const tokens = grantedNow - 1;
    this.#leases.set(key, {
      tokens,
      expiresAtMs: this.#clock.nowMs() + LEASE_MS,
      sharedRemaining: after.remaining,
      tatMs: tat,
      demand: 1,
      renewAt: renewalPoint(grantedNow),
    });
    return { allowed: true, limit: policy.perMinute, remaining: after.remaining + tokens, retryAfterS: 0 };
  }

  /**
   * Reserves the live lease's successor while the lease is still being spent. Nobody waits for it but
   * a take() that finds the lease spent meanwhile; a failure is left to the next take() to meet.
   */
  #renew(key: string, policy: BucketPolicy, nowMs: number, lease: Lease): void {
    if (this.#reserving.has(key)) return;
    // Ahead of need: a low bucket grants it nothing.
    const values = this.#plan(key, policy, nowMs, lease, 0);
    const renewal = this.#db
      .executeQuery<ReservedRow>(CompiledQuery.raw(RESERVE, values))
      .then(
        (result) => {
          this.#reserving.delete(key);
          const row = result.rows[0];
          if (row) this.#extend(key, policy, nowMs, row);
        },
        () => {
          this.#reserving.delete(key);
        },
      )
      .catch(() => {}); // Nothing waits on a renewal's outcome: it must never reject.
    this.#reserving.set(key, renewal);
  }

  /**
   * A renewal's tokens added to what is left of the lease, which lives LEASE_MS from now. Tokens it
   * already held were taken from the bucket when reserved, so keeping them longer allows nothing more.
   */
  #extend(key: string, policy: BucketPolicy, nowMs: number, row: ReservedRow): void {
    const granted = Number(row.granted);
    const tatMs = Number(row.tat_ms);
    const sharedRemaining = describe(tatMs, nowMs, true, policy).remaining;
    const lease = this.#leases.get(key);
    if (granted === 0) {
      // The bucket is empty: what is left of the lease is all there is, and the headers say so.
      if (lease) lease.sharedRemaining = sharedRemaining;
      return;
    }
    this.#leases.set(key, {
      tokens: (lease?.tokens ?? 0) + granted,
      expiresAtMs: this.#clock.nowMs() + LEASE_MS,
      sharedRemaining,
      tatMs,
      demand: 0,
      renewAt: renewalPoint(granted),
    });
  }
}
