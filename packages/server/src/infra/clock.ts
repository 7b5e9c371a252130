/**
 * The one source of time for domain code. Production uses the system clock;
 * tests move a manual clock to cross expiry, refill and grace boundaries
 * without sleeping.
 */
export interface Clock {
  /** Epoch milliseconds. */
  nowMs(): number;
  now(): Date;
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  now: () => new Date(),
};

export class ManualClock implements Clock {
  #ms: number;

  constructor(start: Date | number = Date.UTC(2026, 0, 1)) {
    this.#ms = typeof start === 'number' ? start : start.getTime();
  }

  nowMs(): number {
    return this.#ms;
  }

  now(): Date {
    return new Date(this.#ms);
  }

  advance(ms: number): void {
    this.#ms += ms;
  }

  set(at: Date | number): void {
    this.#ms = typeof at === 'number' ? at : at.getTime();
  }
}
