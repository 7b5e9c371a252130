import type { Clock } from './clock.ts';

export type KeyMode = 'live' | 'test';

/**
 * The time a partner's data lives in. Live mode follows the server clock;
 * test mode follows the partner's test clock, which `POST
 * /test-helpers/clock/advance` moves ahead (CONTRACT §5), so grace periods,
 * teardown and provisioning timeouts can be crossed without waiting.
 */
export function modeNowMs(clock: Clock, offsetMs: number, mode: KeyMode): number {
  return mode === 'test' ? clock.nowMs() + offsetMs : clock.nowMs();
}
