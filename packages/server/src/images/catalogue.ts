import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../infra/clock.ts';
import type { OsImage } from './fields.ts';
import type { CatalogueSource } from './sources.ts';
import { badEntries, type CatalogueReport, parseCatalogue } from './validate.ts';

/** platform-deployment.md, Limits: "OS image list cache in the backend: 30 seconds". */
const CATALOGUE_TTL_MS = 30_000;
/** A read that takes longer is abandoned; the cached catalogue stays served. */
const CATALOGUE_READ_TIMEOUT_MS = 5_000;

export type CatalogueStatus = 'ok' | 'invalid' | 'unreadable';

/** What `/readyz` reports about the catalogue (it never makes the server unready). */
export interface CatalogueState {
  source: string;
  /** `ok`: the last read was served. `invalid`/`unreadable`: it was not, and `problem` says why. */
  status: CatalogueStatus;
  /** Entries served now. */
  entries: number;
  /** When the catalogue served now was read; null before any. */
  loaded_at: string | null;
  /** When the source was last read (successfully or not). */
  checked_at: string | null;
  problem: string | null;
}

export interface CatalogueOptions {
  source: CatalogueSource;
  clock: Clock;
  logger: Logger;
  ttlMs?: number;
  readTimeoutMs?: number;
}

/**
 * The OS image catalogue as served: read from its source at most every 30 s (on the injectable clock),
 * validated whole, and replaced only by a catalogue that is entirely good; a bad or unreadable one
 * leaves the last good one served and is logged entry by entry, field by field. Requests never wait on
 * a read: they get what is cached, and an expired cache starts one read in the background.
 */
export class OsImageCatalogue {
  readonly #source: CatalogueSource;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #ttlMs: number;
  readonly #readTimeoutMs: number;
  #images: readonly OsImage[] = [];
  #byName = new Map<string, OsImage>();
  #json = Buffer.from('[]');
  /** Hash of the text served, and of the last text read (a bad file is logged once, not every 30 s). */
  #servedHash: string | undefined;
  #seenHash: string | undefined;
  #seenProblem: string | undefined;
  #lastReadError: string | undefined;
  #checkedAtMs: number | undefined;
  #loadedAtMs: number | undefined;
  #status: CatalogueStatus = 'ok';
  #problem: string | null = null;
  #reading: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: CatalogueOptions) {
    this.#source = options.source;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#ttlMs = options.ttlMs ?? CATALOGUE_TTL_MS;
    this.#readTimeoutMs = options.readTimeoutMs ?? CATALOGUE_READ_TIMEOUT_MS;
  }

  /** The good entries served now. */
  images(): readonly OsImage[] {
    this.#refreshIfDue();
    return this.#images;
  }

  /** The same as the endpoint's body, JSON in UTF-8: serialised once per catalogue, not once per request. */
  json(): Buffer {
    this.#refreshIfDue();
    return this.#json;
  }

  find(osName: string): OsImage | undefined {
    this.#refreshIfDue();
    return this.#byName.get(osName);
  }

  state(): CatalogueState {
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    return {
      source: this.#source.description,
      status: this.#status,
      entries: this.#images.length,
      loaded_at: iso(this.#loadedAtMs),
      checked_at: iso(this.#checkedAtMs),
      problem: this.#problem,
    };
  }

  /**
   * Reads the source now (one read at a time: a caller arriving during a read shares it). Never
   * rejects: every outcome is in `state()` and the log.
   */
  refresh(): Promise<void> {
    this.#reading ??= this.#read().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  /** Resolves when no read is under way (tests wait on it instead of sleeping). */
  async settled(): Promise<void> {
    while (this.#reading) await this.#reading;
  }

  /** Looks at the clock every second, so a changed source is read even while nobody asks. */
  start(tickMs = 1_000): void {
    this.#timer ??= setInterval(() => this.#refreshIfDue(), tickMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.settled();
  }

  #refreshIfDue(): void {
    if (this.#reading) return;
    if (this.#checkedAtMs !== undefined && this.#clock.nowMs() - this.#checkedAtMs < this.#ttlMs) return;
    void this.refresh();
  }

  async #read(): Promise<void> {
    let text: string;
    try {
      text = await this.#readWithTimeout();
    } catch (error) {
      const message = `cannot read ${this.#source.description}: ${describeError(error)}`;
      this.#checkedAtMs = this.#clock.nowMs();
      this.#status = 'unreadable';
      this.#problem = `${message}; ${this.#serving()}`;
      if (message !== this.#lastReadError)
        this.#logger.error({ source: this.#source.description, problem: message }, 'os image catalogue unreadable');
      this.#lastReadError = message;
      return;
    }
    this.#lastReadError = undefined;
    const nowMs = this.#clock.nowMs();
    this.#checkedAtMs = nowMs;
    const hash = createHash('sha256').update(text).digest('hex');
    if (hash === this.#servedHash) {
      this.#seenHash = hash;
      this.#status = 'ok';
      this.#problem = null;
      return;
    }
    if (hash === this.#seenHash && this.#seenProblem !== undefined) {
      // The same bad text as last time: already logged.
      this.#status = 'invalid';
      this.#problem = this.#seenProblem;
      return;
    }
    this.#seenHash = hash;
    const report = parseCatalogue(text);
    this.#logReport(report);
    if (report.valid) {
      this.#apply(report.images, hash, nowMs);
      this.#status = 'ok';
      this.#problem = null;
      this.#logger.info({ source: this.#source.description, entries: report.images.length }, 'os image catalogue loaded');
      return;
    }
    const bad = badEntries(report).length;
    const what =
      report.errors.length > 0 ? `${report.errors[0]?.message ?? 'is invalid'}` : `${bad} bad ${bad === 1 ? 'entry' : 'entries'}`;
    if (this.#loadedAtMs === undefined) {
      // Nothing good was ever served (a bad file at start-up): serve its good entries rather than none.
      this.#apply(report.images, undefined, nowMs);
    }
    this.#status = 'invalid';
    this.#problem = `${this.#source.description}: ${what}; ${this.#serving()}`;
    this.#seenProblem = this.#problem;
    this.#logger.error({ source: this.#source.description, problem: this.#problem }, 'os image catalogue refused');
  }

  #apply(images: OsImage[], hash: string | undefined, atMs: number): void {
    this.#images = Object.freeze(images);
    this.#byName = new Map(images.map((image) => [image.OS_NAME, image]));
    this.#json = Buffer.from(JSON.stringify(images));
    this.#servedHash = hash;
    this.#loadedAtMs = atMs;
  }

  #serving(): string {
    if (this.#loadedAtMs === undefined) return 'no catalogue is served yet';
    const when = new Date(this.#loadedAtMs).toISOString();
    return this.#servedHash === undefined
      ? `serving the ${this.#images.length} good entries read at ${when}`
      : `serving the last good catalogue (${this.#images.length} entries, read at ${when})`;
  }

  /** One log line per bad field, and per warning, so an operator finds every problem in the log. */
  #logReport(report: CatalogueReport): void {
    const source = this.#source.description;
    for (const error of report.errors)
      this.#logger.error({ source, line: error.line, field: error.field, problem: error.message }, 'os image catalogue: bad document');
    for (const warning of report.warnings)
      this.#logger.warn({ source, line: warning.line, field: warning.field, problem: warning.message }, 'os image catalogue: warning');
    for (const entry of report.reports) {
      for (const problem of entry.problems) {
        this.#logger.error(
          { source, entry: entry.index, os_name: entry.name, line: problem.line, field: problem.field, problem: problem.message },
          'os image catalogue: bad entry',
        );
      }
      for (const warning of entry.warnings) {
        this.#logger.warn(
          { source, entry: entry.index, os_name: entry.name, line: warning.line, field: warning.field, problem: warning.message },
          'os image catalogue: warning',
        );
      }
    }
  }

  async #readWithTimeout(): Promise<string> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`no answer within ${this.#readTimeoutMs} ms`)), this.#readTimeoutMs);
    try {
      return await new Promise<string>((resolve, reject) => {
        controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
        this.#source.read(controller.signal).then(resolve, reject);
      });
    } finally {
      clearTimeout(timer);
    }
  }
}

function describeError(error: unknown): string {
  const err = error as NodeJS.ErrnoException;
  if (err?.code === 'ENOENT') return 'no such file';
  if (err?.code === 'EACCES') return 'permission denied';
  const message = err instanceof Error ? err.message : String(error);
  return message.split('\n')[0]?.slice(0, 300) ?? 'error';
}
