/**
 * How far a partner's test clock may run ahead of real time: 36,525 days (100 years). It is far past
 * anything a partner's tests cross (a 365-day grace period, 30 days of events, years of test runs that
 * each move the clock on) and far from year 9999, past which the embedded database refuses timestamps
 * and an RFC 3339 date-time has no four-digit year to print. `POST /test-helpers/clock/reset` brings
 * the clock back.
 */
export const TEST_CLOCK_MAX_OFFSET_SECONDS = 36_525 * 86_400;
