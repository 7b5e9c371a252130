import pino, { type Logger } from 'pino';

/**
 * How the server's log is buffered on its way to stdout. Writes are
 * asynchronous and batched, off the request's path: once `minLength` bytes are pending (or at the
 * flush once a second), one write at a time, each of at most `maxWrite` bytes. Each write wakes a
 * thread of the pool and then the main thread again: 32 KiB (about 150 access lines) a write rather
 * than 2 KiB takes 5–8 µs of CPU off whoami's 40–50 in the hours when waking a thread costs most.
 * A write carries what a busy server logs while the previous one is in flight: at 4 KiB a write, a
 * server answering 25,000 requests a second logs faster than it writes, and the backlog grows by
 * megabytes a second. At most `maxPending` bytes wait: when stdout is not
 * read (a stalled log collector, a paused terminal) later lines are dropped and counted, and the count
 * is logged once the backlog has been written, instead of the server's memory growing until it is killed.
 */
export const LOG_BUFFER = { minLength: 32768, maxWrite: 65536, maxPending: 16 * 1024 * 1024 } as const;

/** The buffer's sizes, in bytes (LOG_BUFFER; tests choose smaller ones). */
export type LogBuffer = { readonly minLength: number; readonly maxWrite: number; readonly maxPending: number };

/**
 * What pino writes its lines to. Each line is encoded once and handed to pino's destination
 * (sonic-boom) in buffer mode, which keeps the pending chunk's length as a number: in text mode it
 * measures the whole pending chunk again for every line appended, so a line costs in proportion to
 * `maxWrite`.
 */
export class LogStream {
  readonly destination: ReturnType<typeof pino.destination>;
  #dropped = 0;
  #reportDropped: (count: number) => void = () => {};
  /** Callers of flush(callback), called back together at the next 'drain' (one listener for all). */
  #flushed: Array<(error?: Error) => void> = [];

  constructor(dest: number | string, buffer: LogBuffer = LOG_BUFFER) {
    const { minLength, maxWrite, maxPending } = buffer;
    this.destination = pino.destination({ dest, sync: false, contentMode: 'buffer', minLength, maxWrite, maxLength: maxPending });
    this.destination.on('drop', () => {
      this.#dropped++;
    });
    // 'drain': what was pending has been written (at most `minLength` bytes wait), so a report fits.
    this.destination.on('drain', () => {
      const flushed = this.#flushed;
      this.#flushed = [];
      for (const callback of flushed) callback();
      if (this.#dropped === 0) return;
      const count = this.#dropped;
      this.#dropped = 0;
      this.#reportDropped(count);
    });
  }

  /** Who hears how many lines were dropped, once the backlog is written. */
  onDropped(report: (count: number) => void): void {
    this.#reportDropped = report;
  }

  write(line: string): void {
    // In buffer mode the destination takes bytes (its type names only text).
    this.destination.write(Buffer.from(line) as unknown as string);
  }

  /**
   * Starts writing what is pending (see flushLog); `callback`, if given, once it is written. pino's
   * `logger.flush()` passes a callback every time: they wait here, not as listeners on the destination.
   */
  flush(callback?: (error?: Error) => void): void {
    // `destroyed` is set once the destination is closed, where flush() would throw (missing from its type).
    if ((this.destination as unknown as { destroyed: boolean }).destroyed) {
      callback?.(new Error('the log is closed'));
      return;
    }
    if (callback) this.#flushed.push(callback);
    this.destination.flush();
  }
}

/**
 * The server's logger: JSON lines on stdout (fd 1, or `dest`, a file descriptor or path), flushed with
 * flushLog now and then and on shutdown. Lines dropped because stdout was not read are counted in a
 * warning (`dropped_lines`) once it is.
 */
export function createLogger(level: string, dest: number | string = 1, buffer: LogBuffer = LOG_BUFFER): Logger {
  const stream = new LogStream(dest, buffer);
  const logger = pino({ level, base: { service: 'tenantry' } }, stream);
  stream.onDropped((count) => logger.warn({ dropped_lines: count }, 'log lines dropped: stdout was not read as fast as the server logged'));
  return logger;
}

/**
 * Starts writing what the log holds, without waiting for it. pino's `logger.flush()`
 * hands sonic-boom a callback every time, and sonic-boom keeps a 'drain' and an 'error' listener
 * for each until its buffer empties, which under steady load it never does: a server flushing once a
 * second under load would pile up two listeners a second (Node's MaxListenersExceededWarning after ten
 * seconds, then as many fsyncs as seconds of load when the load stops). LogStream keeps such
 * callbacks itself; this asks for none.
 */
export function flushLog(logger: Logger): void {
  logStreamOf(logger)?.flush();
}

/** The LogStream a logger writes to, if createLogger made it (a logger given by a test may write elsewhere). */
export function logStreamOf(logger: Logger): LogStream | undefined {
  const stream = (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym];
  return stream instanceof LogStream ? stream : undefined;
}
