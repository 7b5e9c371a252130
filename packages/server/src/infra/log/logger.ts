import pino, { type Logger } from 'pino';

/**
 * How the server's log is buffered on its way to stdout (decision 218). Writes are asynchronous and
 * batched, off the request's path. pino's destination (sonic-boom) appends each line to its last
 * pending chunk and measures that chunk's bytes again on every line, so a line costs in proportion to
 * the chunk (up to `maxWrite`, 16 KiB by default): at one access-log line per request that was a
 * quarter of `GET /auth/whoami`'s CPU. Chunks of at most 4 KiB, written once 2 KiB are pending, keep
 * that cost small and the writes few.
 */
export const LOG_BUFFER = { minLength: 2048, maxWrite: 4096 } as const;

/**
 * The server's logger: JSON lines on stdout (fd 1, or `dest`, a file descriptor or path), flushed with
 * flushLog now and then and on shutdown.
 */
export function createLogger(level: string, dest: number | string = 1): Logger {
  return pino({ level, base: { service: 'tenantry' } }, pino.destination({ dest, sync: false, ...LOG_BUFFER }));
}

/**
 * Starts writing what the log holds, without waiting for it. Not pino's `logger.flush()`: that always
 * hands its destination a callback, and sonic-boom keeps a 'drain' and an 'error' listener for each
 * callback until its buffer empties, which under steady load it never does. A server flushing once a
 * second under load piled up two listeners a second (Node's MaxListenersExceededWarning after ten
 * seconds, then as many fsyncs as seconds of load when the load stopped).
 */
export function flushLog(logger: Logger): void {
  const stream = (logger as unknown as Record<symbol, { flush?: () => void; destroyed?: boolean } | undefined>)[pino.symbols.streamSym];
  if (stream === undefined || stream.destroyed === true || typeof stream.flush !== 'function') return;
  stream.flush();
}
