import { onAbort } from './abort.ts';
import type { HttpClient } from './client.ts';
import { TenantryConnectionError, TenantryError } from './errors.ts';
import type { WebhookEvent } from './generated/api.ts';

export interface EventStreamOptions {
  /** Continue after this event id (the `id` of the last event you handled). Default: from now on. */
  lastEventId?: string;
  /** Ends the iteration (and the connection) when aborted. */
  signal?: AbortSignal;
  /** Milliseconds each (re)connection may wait for the server's answer (the client's `timeout` when absent). */
  timeout?: number;
  /** Called each time the stream is (re)connected. */
  onOpen?: () => void;
  /** Called before each reconnect: why the connection ended, and how long the client waits. */
  onReconnect?: (info: { error: unknown; delayMs: number }) => void;
}

/** Ids remembered to drop the repeats a resume sends (the server repeats a few seconds). */
const REMEMBERED_IDS = 10_000;
const MAX_BACKOFF_MS = 30_000;

/**
 * `GET /events/stream` as an async iterable: every event of the key's mode, in the order the server
 * sends them, across reconnects. When the connection ends (the token expired, the server restarted, the
 * network dropped), the client reconnects with a fresh token and `Last-Event-ID`, and drops the events
 * it already yielded; errors that retrying cannot fix (a revoked key, a missing scope) are thrown.
 */
export class EventStream implements AsyncIterable<WebhookEvent> {
  readonly #http: HttpClient;
  readonly #options: EventStreamOptions;
  #lastEventId: string | undefined;

  constructor(http: HttpClient, options: EventStreamOptions = {}) {
    this.#http = http;
    this.#options = options;
    this.#lastEventId = options.lastEventId;
  }

  /** The id of the last event yielded: pass it as `lastEventId` to continue in another process. */
  get lastEventId(): string | undefined {
    return this.#lastEventId;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<WebhookEvent> {
    const { signal } = this.#options;
    const seen = new Set<string>();
    let retryMs = 1_000;
    let failures = 0;
    while (!signal?.aborted) {
      let error: unknown;
      // Each connection has its own signal, linked to the caller's until the connection ends.
      const connection = new AbortController();
      const unlink = signal ? onAbort(signal, () => connection.abort(signal.reason)) : () => {};
      try {
        const headers: Record<string, string> = { accept: 'text/event-stream' };
        if (this.#lastEventId !== undefined) headers['last-event-id'] = this.#lastEventId;
        const timeout = this.#options.timeout;
        const response = await this.#http.open('/events/stream', {
          headers,
          signal: connection.signal,
          ...(timeout !== undefined ? { timeout } : {}),
        });
        if (!response.body || !(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
          throw new TenantryError({ code: 'HTTP_200', status: 200, message: 'the server did not answer with an event stream' });
        }
        this.#options.onOpen?.();
        failures = 0;
        for await (const message of messages(response.body)) {
          if (message.retry !== undefined) retryMs = message.retry;
          if (message.data === undefined) continue;
          const event = JSON.parse(message.data) as WebhookEvent;
          if (message.id !== undefined) this.#lastEventId = message.id;
          if (seen.has(event.id)) continue;
          seen.add(event.id);
          if (seen.size > REMEMBERED_IDS) seen.delete(seen.values().next().value as string);
          yield event;
        }
      } catch (caught) {
        if (signal?.aborted) return;
        // What retrying cannot fix: thrown (the client already retried what the error table allows).
        const final = caught instanceof TenantryError && !(caught instanceof TenantryConnectionError);
        if (final && caught.status < 500 && caught.status !== 429) throw caught;
        error = caught;
        failures++;
      } finally {
        unlink();
        connection.abort();
      }
      if (signal?.aborted) return;
      // A stream that ended normally reconnects after `retry`; repeated failures back off.
      const delayMs = failures === 0 ? retryMs : Math.min(MAX_BACKOFF_MS, retryMs * 2 ** (failures - 1));
      this.#options.onReconnect?.({ error: error ?? new Error('the stream ended'), delayMs });
      // An abort ends the wait early; the loop's condition then ends the iteration.
      await this.#http.pause(delayMs, signal).catch(() => {});
    }
  }
}

interface Message {
  id?: string;
  event?: string;
  data?: string;
  retry?: number;
}

/** The server-sent events of a body (the WHATWG event stream format: fields, comments, blank-line dispatch). */
async function* messages(body: ReadableStream<Uint8Array>): AsyncGenerator<Message> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = '';
  let message: Message = {};
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.search(/\r\n|\r|\n/);
      while (newline !== -1) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        newline = buffer.search(/\r\n|\r|\n/);
        if (line === '') {
          if (data.length > 0 || message.retry !== undefined) yield { ...message, ...(data.length > 0 ? { data: data.join('\n') } : {}) };
          message = {};
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') data.push(value);
        else if (field === 'id' && !value.includes('\0')) message.id = value;
        else if (field === 'event') message.event = value;
        else if (field === 'retry' && /^\d+$/.test(value)) message.retry = Number(value);
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
