export interface RateLimitsTable {
  key: string;
  /** GCRA theoretical arrival time, epoch milliseconds. */
  tat_ms: number;
  /** Tokens the last reservation took (SqlRateLimiter). */
  granted: number;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface RateLimitTables {
  rate_limits: RateLimitsTable;
}
