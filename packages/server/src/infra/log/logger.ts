import pino, { type Logger } from 'pino';

/**
 * How the server's log is buffered on its way to stdout (decisions 218, 221). Writes are asynchronous
 * and batched, off the request's path: once `minLength` bytes are pending, one write at a time, each of
 * at most `maxWrite` bytes. A write carries what a busy server logged while the previous one was in
 * flight: at 4 KiB a write, a server answering 25,000 requests a second logged faster than it wrote,
 * and the backlog grew by megabytes a second.
 */
export const LOG_BUFFER = { minLength: 2048, maxWrite: 65536 } as const;

/**
 * What pino writes its lines to. Each line is encoded once and handed to pino's destination
 * (sonic-boom) in buffer mode, which keeps the pending chunk's length as a number: in text mode it
 * measures the whole pending chunk again for every line appended, so a line cost in proportion to
 * `maxWrite` (decision 218).
 */
export class LogStream {
  readonly destination: ReturnType<typeof pino.destination>;

  constructor(dest: number | string) {
    this.destination = pino.destination({ dest, sync: false, contentMode: 'buffer', ...LOG_BUFFER });
  }

  write(line: string): void {
    // In buffer mode the destination takes bytes (its type names only text).
    this.destination.write(Buffer.from(line) as unknown as string);
  }

  /** Starts writing what is pending, without waiting for it (see flushLog). */
  flush(): void {
    // `destroyed` is set once the destination is closed, where flush() would throw (missing from its type).
    if (!(this.destination as unknown as { destroyed: boolean }).destroyed) this.destination.flush();
  }
}

/**
 * The server's logger: JSON lines on stdout (fd 1, or `dest`, a file descriptor or path), flushed with
 * flushLog now and then and on shutdown.
 */
export function createLogger(level: string, dest: number | string = 1): Logger {
  return pino({ level, base: { service: 'tenantry' } }, new LogStream(dest));
}

/**
 * Starts writing what the log holds, without waiting for it. Not pino's `logger.flush()`: that always
 * hands its destination a callback, and sonic-boom keeps a 'drain' and an 'error' listener for each
 * callback until its buffer empties, which under steady load it never does. A server flushing once a
 * second under load piled up two listeners a second (Node's MaxListenersExceededWarning after ten
 * seconds, then as many fsyncs as seconds of load when the load stopped).
 */
export function flushLog(logger: Logger): void {
  const stream = (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym];
  if (stream instanceof LogStream) stream.flush();
}
