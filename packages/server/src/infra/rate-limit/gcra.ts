/**
 * A token bucket expressed as GCRA (the generic cell rate algorithm): one
 * number per bucket, the "theoretical arrival time" (TAT). A request at `now`
 * is allowed when the bucket is not more than `burst - 1` intervals ahead of
 * now; allowing it pushes the TAT one interval further. This is the same
 * arithmetic in memory and in SQL (`sql-store.ts`), so both stores agree.
 */
export interface BucketPolicy {
  perMinute: number;
  burst: number;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until one request would be allowed; 0 when allowed. */
  retryAfterS: number;
}

export const intervalMs = (policy: BucketPolicy): number => 60_000 / policy.perMinute;
export const toleranceMs = (policy: BucketPolicy): number => (policy.burst - 1) * intervalMs(policy);

/** The TAT after a request at `nowMs`, and whether it was allowed. */
export function step(tatMs: number | undefined, nowMs: number, policy: BucketPolicy): { tatMs: number; allowed: boolean } {
  const base = Math.max(tatMs ?? nowMs, nowMs);
  if (base - nowMs > toleranceMs(policy)) return { tatMs: base, allowed: false };
  return { tatMs: base + intervalMs(policy), allowed: true };
}

/** The headers' view of a bucket after a decision. */
export function describe(tatMs: number, nowMs: number, allowed: boolean, policy: BucketPolicy): RateDecision {
  const interval = intervalMs(policy);
  const ahead = Math.max(0, tatMs - nowMs);
  const remaining = Math.max(0, Math.min(policy.burst, Math.floor((toleranceMs(policy) + interval - ahead) / interval)));
  const retryAfterS = allowed ? 0 : Math.max(1, Math.ceil((ahead - toleranceMs(policy)) / 1000));
  return { allowed, limit: policy.perMinute, remaining, retryAfterS };
}
