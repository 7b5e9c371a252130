/**
 * One backend's health as the thresholds see it: it leaves after `failureThreshold` consecutive failed
 * probes and returns after `successThreshold` consecutive good ones. A node the manager has not judged yet
 * (undefined) is kept out of the slice until it has passed, and reported once it has failed enough.
 */
export class BackendHealth {
  healthy: boolean | undefined;
  #failures = 0;
  #successes = 0;
  lastReason: string | undefined;

  constructor(initiallyHealthy: boolean | undefined) {
    this.healthy = initiallyHealthy;
  }

  /** Records one probe; returns the new state when it changed. */
  record(
    ok: boolean,
    thresholds: { failureThreshold: number; successThreshold: number },
    reason?: string,
  ): 'healthy' | 'unhealthy' | undefined {
    this.lastReason = ok ? undefined : reason;
    if (ok) {
      this.#failures = 0;
      this.#successes += 1;
      if (this.healthy !== true && this.#successes >= thresholds.successThreshold) {
        this.healthy = true;
        return 'healthy';
      }
    } else {
      this.#successes = 0;
      this.#failures += 1;
      if (this.healthy !== false && this.#failures >= thresholds.failureThreshold) {
        this.healthy = false;
        return 'unhealthy';
      }
    }
    return undefined;
  }
}
