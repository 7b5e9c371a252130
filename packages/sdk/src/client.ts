/**
 * The HTTP core of the SDK: token handling and retries exactly as partner-api.md says (Token handling
 * rules; Errors, Action column; Idempotency rules), every request bounded by a timeout and the caller's
 * signal. fetch and Web Crypto only.
 */
import { bounded, pause } from './abort.ts';
import { TenantryConnectionError, type TenantryError, toError } from './errors.ts';
import { type ClientOptions, checkTimeout, type ReadOptions, type RequestOptions, type Settings, settings } from './options.ts';

/** What answered a successful call: each returned object carries it as `lastResponse` (not enumerable). */
export interface LastResponse {
  /** The `X-Request-Id` header: quote it when asking the operator about a call. */
  requestId: string | undefined;
  statusCode: number;
  headers: Headers;
  /** The `Idempotency-Key` sent (yours or the generated one), on mutating calls. */
  idempotencyKey?: string;
}

/** A call's result with the response that carried it. */
export type WithLastResponse<T> = T & { readonly lastResponse: LastResponse };

/** Sets `lastResponse` on an object result, out of `JSON.stringify`, spreads and `Object.keys`. */
export function attachLastResponse<T>(result: T, lastResponse: LastResponse | undefined): T {
  if (lastResponse && typeof result === 'object' && result !== null && Object.isExtensible(result)) {
    Object.defineProperty(result, 'lastResponse', { value: lastResponse, enumerable: false, configurable: true });
  }
  return result;
}

export function lastResponseOf(result: unknown): LastResponse | undefined {
  return typeof result === 'object' && result !== null ? (result as { lastResponse?: LastResponse }).lastResponse : undefined;
}

const API = '/api/public/v1';
/** Refresh this long before the token expires (Token handling rule 1). */
const REFRESH_EARLY_MS = 60_000;
/** Codes retried after `Retry-After` (Errors, Action column). */
const RETRY_AFTER_CODES = new Set([
  'BUSY',
  'IDEMPOTENCY_KEY_IN_PROGRESS',
  'RATE_LIMITED',
  'TOO_MANY_OPERATIONS',
  'UNAVAILABLE',
  'PARTNER_NOT_READY',
  'GPU_USAGE_UNAVAILABLE',
]);

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export class HttpClient {
  readonly #settings: Settings;
  #token: { value: string; expiresAt: number } | undefined;
  #exchanging: Promise<string> | undefined;

  constructor(options: ClientOptions) {
    this.#settings = settings(options);
  }

  /**
   * One API call: a token, retries by the error table, one replay after a 401. Resolves the parsed body,
   * with `lastResponse` when it is an object.
   */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const timeout = checkTimeout(options.timeout, 'timeout') ?? this.#settings.timeout;
    options.signal?.throwIfAborted();
    const idempotencyKey = MUTATING.has(method) ? (options.idempotencyKey ?? crypto.randomUUID()) : undefined;
    // Repeating cannot act twice: a read, or a write the server recognises by its key.
    const safe = method === 'GET' || idempotencyKey !== undefined;
    const url = new URL(`${this.#settings.baseUrl}${API}${path}`);
    for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    const headers = this.#headers();
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    const body = options.body !== undefined ? { body: JSON.stringify(options.body) } : {};
    let replayed = false;
    for (let attempt = 0; ; attempt++) {
      const token = await this.#accessToken(timeout, options.signal);
      let error: TenantryError;
      try {
        const init = { method, headers: { ...headers, authorization: `Bearer ${token}` }, ...body };
        const { response, text } = await this.#send(url, init, timeout, options.signal);
        if (response.ok) {
          const result = (text === '' ? undefined : JSON.parse(text)) as T;
          return attachLastResponse(result, {
            requestId: response.headers.get('x-request-id') ?? undefined,
            statusCode: response.status,
            headers: response.headers,
            ...(idempotencyKey ? { idempotencyKey } : {}),
          });
        }
        error = toError(response, text);
      } catch (caught) {
        if (!(caught instanceof TenantryConnectionError)) throw caught;
        error = caught;
      }
      // Token handling rule 4: drop, exchange once, replay once; a second 401 is final.
      if (error.status === 401 && !replayed) {
        replayed = true;
        if (this.#token?.value === token) this.#token = undefined;
        attempt--;
        continue;
      }
      const wait = this.#retryDelay(error, safe, attempt);
      if (wait === undefined) throw error;
      await pause(this.#settings.sleep, wait, options.signal);
    }
  }

  /**
   * Opens a GET whose body the caller reads as it arrives (the event stream): the same token handling
   * and retries as `request`, resolving the response once it answered 2xx. `timeout` bounds the wait for
   * the answer's headers; `signal` keeps aborting the body after that, so it should be the connection's own.
   */
  async open(path: string, options: { headers?: Record<string, string> } & ReadOptions = {}): Promise<Response> {
    const timeout = checkTimeout(options.timeout, 'timeout') ?? this.#settings.timeout;
    options.signal?.throwIfAborted();
    const url = `${this.#settings.baseUrl}${API}${path}`;
    let replayed = false;
    for (let attempt = 0; ; attempt++) {
      const token = await this.#accessToken(timeout, options.signal);
      const request = bounded({ method: 'GET', url, timeout }, options.signal);
      let error: TenantryError;
      try {
        const headers = { ...this.#headers(), ...options.headers, authorization: `Bearer ${token}` };
        const response = await this.#settings.fetch(url, { headers, signal: request.signal });
        if (response.ok) {
          request.stopTimer();
          return response;
        }
        error = toError(response, await response.text());
        request.release();
      } catch (caught) {
        request.release();
        const failure = request.fail(caught);
        if (!(failure instanceof TenantryConnectionError)) throw failure;
        error = failure;
      }
      if (error.status === 401 && !replayed) {
        replayed = true;
        if (this.#token?.value === token) this.#token = undefined;
        attempt--;
        continue;
      }
      const wait = this.#retryDelay(error, true, attempt);
      if (wait === undefined) throw error;
      await pause(this.#settings.sleep, wait, options.signal);
    }
  }

  /** Waits as this client waits (tests make it instant); rejects with the signal's reason when it aborts. */
  pause(ms: number, signal?: AbortSignal): Promise<void> {
    return pause(this.#settings.sleep, ms, signal);
  }

  /** This client's clock (ms). */
  now(): number {
    return this.#settings.now();
  }

  /** Milliseconds before the next attempt, or undefined when the table says not to retry. */
  #retryDelay(error: TenantryError, safe: boolean, attempt: number): number | undefined {
    if (attempt >= this.#settings.maxRetries) return undefined;
    const backoff = Math.min(30_000, 500 * 2 ** attempt) * (0.5 + Math.random() / 2);
    // No answer (refused, reset, timed out): like a 503 without Retry-After, when repeating is safe.
    if (error instanceof TenantryConnectionError) return safe ? backoff : undefined;
    const known = RETRY_AFTER_CODES.has(error.code);
    const byStatus = !known && (error.status === 429 || error.status === 503);
    if (known || byStatus) {
      if (error.retryAfter === undefined) return backoff;
      // Longer than the cap: thrown at once, its `retryAfter` telling the caller when to come back.
      return error.retryAfter <= this.#settings.maxRetryAfter ? error.retryAfter * 1000 : undefined;
    }
    // INTERNAL_ERROR (or an unknown 5xx): only when repeating cannot act twice.
    if (error.status >= 500 && safe) return backoff;
    return undefined;
  }

  #headers(): Record<string, string> {
    return this.#settings.userAgent ? { 'user-agent': this.#settings.userAgent } : {};
  }

  /** One HTTP request, read to the end of its body within `timeout`. */
  async #send(url: URL | string, init: RequestInit & { method: string }, timeout: number, signal: AbortSignal | undefined) {
    const request = bounded({ method: init.method, url: String(url), timeout }, signal);
    try {
      const response = await this.#settings.fetch(url, { ...init, signal: request.signal });
      return { response, text: await response.text() };
    } catch (error) {
      throw request.fail(error);
    } finally {
      request.release();
    }
  }

  /**
   * Token handling rules 1–3: cached, refreshed 60 s early, one exchange for any number of waiting calls.
   * Each call stops waiting at its own timeout or abort; the shared exchange goes on for the others.
   */
  async #accessToken(timeout: number, signal: AbortSignal | undefined): Promise<string> {
    if (this.#token && this.#settings.now() < this.#token.expiresAt - REFRESH_EARLY_MS) return this.#token.value;
    if (!this.#exchanging) {
      const exchanging = this.#exchange().finally(() => {
        this.#exchanging = undefined;
      });
      // Every caller may have stopped waiting: a failure then is nobody's unhandled rejection.
      exchanging.catch(() => {});
      this.#exchanging = exchanging;
    }
    const exchanging = this.#exchanging;
    const wait = bounded({ method: 'POST', url: this.#tokenUrl(), timeout }, signal);
    try {
      const stopped = new Promise<never>((_, reject) => {
        if (wait.signal.aborted) reject(wait.signal.reason);
        else wait.signal.addEventListener('abort', () => reject(wait.signal.reason), { once: true });
      });
      return await Promise.race([exchanging, stopped]);
    } catch (error) {
      throw wait.fail(error);
    } finally {
      wait.release();
    }
  }

  #tokenUrl(): string {
    return `${this.#settings.baseUrl}${API}/auth/token`;
  }

  async #exchange(): Promise<string> {
    const init = {
      method: 'POST',
      headers: { ...this.#headers(), 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: this.#settings.apiKey }),
    };
    for (let attempt = 0; ; attempt++) {
      let error: TenantryError;
      try {
        const { response, text } = await this.#send(this.#tokenUrl(), init, this.#settings.timeout, undefined);
        if (response.ok) {
          const body = JSON.parse(text) as { access_token: string; expires_in: number };
          this.#token = { value: body.access_token, expiresAt: this.#settings.now() + body.expires_in * 1000 };
          return body.access_token;
        }
        error = toError(response, text);
      } catch (caught) {
        if (!(caught instanceof TenantryConnectionError)) throw caught;
        error = caught;
      }
      // PARTNER_NOT_READY, UNAVAILABLE and RATE_LIMITED say when to come back, and an exchange that never
      // got an answer is tried again (it changes nothing); anything else is final.
      const wait = this.#retryDelay(error, error instanceof TenantryConnectionError, attempt);
      if (wait === undefined) throw error;
      await this.#settings.sleep(wait);
    }
  }
}
