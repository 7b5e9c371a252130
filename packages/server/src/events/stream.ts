import { PassThrough, type Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { Db } from '../infra/db/handle.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import { idFloor, idTimeMs } from '../infra/ids.ts';
import type { KeyMode } from '../infra/mode.ts';
import { serializeEventBody } from './schemas.ts';
import { eventsAfter, newestEventId } from './store.ts';
import type { EventTables } from './tables.ts';

/**
 * `GET /events/stream`: the partner's events as server-sent events, for `tenantry listen` and any
 * client that wants events without a public receiver.
 *
 * Ids are minted when an event is written, not when its transaction commits, so an event can become
 * visible after one with a higher id. The stream therefore reads again, on every poll, a window of
 * `lookbackMs` behind the newest id it has seen, and sends what it has not sent yet: a late commit
 * within the window still arrives. After a resume (`Last-Event-ID`) the window behind that id is sent
 * again, so a client deduplicates on `id` as it does for webhooks (at least once).
 *
 * Each poll is one short read with no transaction; between polls the stream holds nothing but its
 * timer. Every poll re-checks the token and the partner (expiry, suspension), so a stream ends when
 * its token does and the client reconnects with a fresh one.
 */
export interface EventStreamOptions {
  pollMs: number;
  heartbeatMs: number;
  lookbackMs: number;
  /** Open streams per partner and process. */
  maxPerPartner: number;
}

export const DEFAULT_STREAM_OPTIONS: EventStreamOptions = { pollMs: 1_000, heartbeatMs: 15_000, lookbackMs: 5_000, maxPerPartner: 5 };

/** Rows per read; a window with more is read in several. */
const BATCH = 200;
/** What the client waits before reconnecting after the stream ends (SSE `retry`). */
const RECONNECT_MS = 1_000;

export interface StreamRequest {
  partnerId: string;
  mode: KeyMode;
  lastEventId: string | undefined;
  /** Throws when the caller may no longer read (token expired, partner suspended). */
  stillAllowed(): Promise<void>;
}

export class EventStreams {
  readonly #db: Db<EventTables>;
  readonly #logger: Logger;
  readonly #options: EventStreamOptions;
  readonly #open = new Map<PassThrough, string>();

  constructor(deps: { db: Db<EventTables>; logger: Logger; options?: Partial<EventStreamOptions> }) {
    this.#db = deps.db;
    this.#logger = deps.logger;
    this.#options = { ...DEFAULT_STREAM_OPTIONS, ...deps.options };
  }

  /** Opens a stream, or refuses one past the partner's limit of open streams. */
  open(request: StreamRequest): Readable {
    const open = [...this.#open.values()].filter((partner) => partner === request.partnerId).length;
    if (open >= this.#options.maxPerPartner) {
      throw new ApiError('RATE_LIMITED', `At most ${this.#options.maxPerPartner} event streams may be open at once; close one first.`, {
        retryAfter: Math.ceil(this.#options.pollMs / 1000) * 5,
      });
    }
    const out = new PassThrough();
    this.#open.set(out, request.partnerId);
    out.write(`retry: ${RECONNECT_MS}\n: connected\n\n`);
    this.#run(out, request).catch((err: unknown) => {
      this.#logger.warn({ err, partner: request.partnerId }, 'event stream ended by an error');
      out.end();
    });
    return out;
  }

  /** How many streams this process serves now. */
  get openCount(): number {
    return this.#open.size;
  }

  /** Ends every open stream (shutdown): clients reconnect elsewhere with their Last-Event-ID. */
  closeAll(): void {
    for (const out of this.#open.keys()) out.end();
  }

  async #run(out: PassThrough, request: StreamRequest): Promise<void> {
    const { pollMs, heartbeatMs, lookbackMs } = this.#options;
    let closed = false;
    let wake: (() => void) | undefined;
    const finish = () => {
      closed = true;
      this.#open.delete(out);
      wake?.();
    };
    out.once('close', finish);
    out.once('finish', finish);
    const sleep = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });

    // Sent ids within the window, by their time; the newest time seen moves the window.
    const sent = new Map<string, number>();
    let newestMs = 0;
    if (request.lastEventId !== undefined) {
      newestMs = idTimeMs(request.lastEventId);
      sent.set(request.lastEventId, newestMs);
    } else {
      // From now on: what is already there, in the window too, counts as sent.
      const newest = await newestEventId(this.#db, request.partnerId, request.mode);
      if (newest !== undefined) {
        newestMs = idTimeMs(newest);
        await this.#read(request, idFloor('delivery', newestMs - lookbackMs), (id) => sent.set(id, idTimeMs(id)));
      }
    }

    let lastWrite = Date.now();
    while (!closed) {
      try {
        await request.stillAllowed();
      } catch {
        out.end();
        return;
      }
      await this.#read(request, idFloor('delivery', newestMs - lookbackMs), async (id, row) => {
        if (closed || sent.has(id)) return;
        const time = idTimeMs(id);
        sent.set(id, time);
        newestMs = Math.max(newestMs, time);
        const ok = out.write(`id: ${id}\nevent: ${row.type}\ndata: ${serializeEventBody(row)}\n\n`);
        lastWrite = Date.now();
        if (!ok && !closed) await new Promise((resolve) => out.once('drain', resolve));
      });
      for (const [id, time] of sent) if (time < newestMs - lookbackMs * 2) sent.delete(id);
      // Comments keep proxies and clients from taking a quiet stream for a dead one.
      if (!closed && Date.now() - lastWrite >= heartbeatMs) {
        out.write(': heartbeat\n\n');
        lastWrite = Date.now();
      }
      if (!closed) await sleep(pollMs);
    }
  }

  /** Every event above `floor`, oldest first, in batches. */
  async #read(
    request: StreamRequest,
    floor: string,
    each: (id: string, row: Awaited<ReturnType<typeof eventsAfter>>[number]) => unknown,
  ): Promise<void> {
    let afterId = floor;
    for (;;) {
      const rows = await eventsAfter(this.#db, { partnerId: request.partnerId, mode: request.mode, afterId, limit: BATCH });
      for (const row of rows) await each(row.id, row);
      if (rows.length < BATCH) return;
      afterId = rows[rows.length - 1]?.id ?? afterId;
    }
  }
}
