import { type Expression, type RawBuilder, sql } from 'kysely';

/** The first address of every partner's pool (per mode): 10.0.0.0/14 cut into /24 ranges. */
const POOL_BASE = '10.0.0.0';

/** The /24 at index `idx` of the pool (10.0.0.0/24, 10.0.1.0/24, …), computed by PostgreSQL's inet arithmetic. */
export function rangeCidr(idx: Expression<unknown>): RawBuilder<string> {
  return sql<string>`host(${POOL_BASE}::inet + ${idx} * 256) || '/24'`;
}
