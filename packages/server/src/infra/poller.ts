import type { Logger } from 'pino';

/**
 * A background loop: one pass at a time, every `intervalMs`, at once after `kick()`, and again
 * straight away while a pass reports that more may be waiting. The operation engine and the
 * webhook dispatcher each run one; `stop()` waits for the pass in progress.
 */
export class Poller {
  readonly #name: string;
  readonly #pass: () => Promise<boolean>;
  readonly #logger: Logger;
  #intervalMs = 250;
  #timer: NodeJS.Timeout | undefined;
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
    clearTimeout(this.#timer);
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
      if (!this.#stopped) this.#timer = setTimeout(() => this.kick(), this.#intervalMs);
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      try {
        if (await this.#pass()) this.#again = true;
      } catch (err) {
        this.#logger.warn({ err }, `${this.#name} pass failed`);
        return;
      }
    } while (this.#again && !this.#stopped);
  }
}
