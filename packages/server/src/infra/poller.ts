import type { Logger } from 'pino';
import { tracing } from './telemetry/tracing.ts';

/**
 * A background loop: one pass at a time, every `intervalMs` at the latest, at once after `kick()`,
 * at a time asked for with `wakeIn()` (work this process scheduled for later), and again straight
 * away while a pass reports that more may be waiting. The interval is the safety net for work no
 * one told this process about (another process's, a lease that ran out); what this process knows of
 * wakes it. The operation engine and the webhook dispatcher each run one; `stop()` waits for the
 * pass in progress.
 */
export class Poller {
  readonly #name: string;
  readonly #pass: () => Promise<boolean>;
  readonly #logger: Logger;
  #intervalMs = 250;
  #timer: NodeJS.Timeout | undefined;
  /** When the armed timer fires (performance.now() time); Infinity when none is armed. */
  #timerAt = Number.POSITIVE_INFINITY;
  /** The earliest time a pass was asked for with `wakeIn()`; Infinity when none is. */
  #wakeAt = Number.POSITIVE_INFINITY;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;

  /** `pass` answers true when it may have left work behind (a full batch). */
  constructor(name: string, pass: () => Promise<boolean>, logger: Logger) {
    this.#name = name;
    this.#pass = pass;
    this.#logger = logger;
  }

  start(intervalMs: number): void {
    this.#intervalMs = intervalMs;
    this.#stopped = false;
    this.kick();
  }

  /** Asks for a pass as soon as possible. */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#disarm();
    // Outside the caller's span: a request's commit that wakes the loop is not the cause of its pass.
    this.#running = tracing()
      .detached(() => this.#loop())
      .finally(() => {
        this.#running = undefined;
        if (!this.#stopped) this.#arm();
      });
  }

  /** Asks for a pass in `ms` (or sooner, if the interval or a kick comes first). */
  wakeIn(ms: number): void {
    if (this.#stopped) return;
    this.#wakeAt = Math.min(this.#wakeAt, performance.now() + Math.max(0, ms));
    // A pass in progress arms the timer when it ends.
    if (!this.#running) this.#arm();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#disarm();
    await this.#running;
  }

  /** Arms the timer for the next pass: the interval from now, or the earliest wake asked for. */
  #arm(): void {
    const now = performance.now();
    const at = Math.min(now + this.#intervalMs, this.#wakeAt);
    if (this.#timer && this.#timerAt <= at) return;
    this.#disarm();
    this.#timerAt = at;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerAt = Number.POSITIVE_INFINITY;
        this.kick();
      },
      Math.max(0, at - now),
    );
  }

  #disarm(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      // This pass sees whatever fell due by now; wakes asked for a later time stay.
      if (this.#wakeAt <= performance.now()) this.#wakeAt = Number.POSITIVE_INFINITY;
      try {
        if (await this.#pass()) this.#again = true;
      } catch (err) {
        this.#logger.warn({ err }, `${this.#name} pass failed`);
        return;
      }
    } while (this.#again && !this.#stopped);
  }
}
