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

/** The server's logger: JSON lines on stdout (fd 1), flushed by the caller now and then and on shutdown. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'tenantry' } }, pino.destination({ dest: 1, sync: false, ...LOG_BUFFER }));
}
