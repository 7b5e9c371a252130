/**
 * The HTTP core of the SDK: token handling and retries exactly as partner-api.md says (Token handling
 * rules; Errors, Action column; Idempotency rules). fetch and Web Crypto only.
 */
/** An error answered by the API, typed by its envelope; unknown codes keep their HTTP status. */
export class TenantryError extends Error {
  code;
  status;
  requestId;
  details;
  /** Seconds, from `Retry-After`. */
  retryAfter;
  constructor(init) {
    super(init.message);
    this.name = 'TenantryError';
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
  }
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
  #options;
  #token;
  #exchanging;
  constructor(options) {
    this.#options = {
      maxRetries: 3,
      now: () => Date.now(),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      ...options,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      baseUrl: options.baseUrl.replace(/\/$/, ''),
    };
  }
  /** One API call: a token, retries by the error table, one replay after a 401. Resolves the parsed body. */
  async request(method, path, options = {}) {
    const idempotencyKey = MUTATING.has(method) ? (options.idempotencyKey ?? crypto.randomUUID()) : undefined;
    let replayed = false;
    for (let attempt = 0; ; attempt++) {
      const token = await this.#accessToken();
      const response = await this.#send(method, path, options, token, idempotencyKey);
      if (response.ok) return response.status === 204 ? undefined : await response.json();
      const error = await toError(response);
      // Token handling rule 4: drop, exchange once, replay once; a second 401 is final.
      if (error.status === 401 && !replayed) {
        replayed = true;
        if (this.#token?.value === token) this.#token = undefined;
        attempt--;
        continue;
      }
      const wait = this.#retryDelay(error, method, idempotencyKey !== undefined, attempt);
      if (wait === undefined) throw error;
      await this.#options.sleep(wait);
    }
  }
  /**
   * Opens a GET whose body the caller reads as it arrives (the event stream): the same token handling
   * and retries as `request`, resolving the response once it answered 2xx.
   */
  async open(path, options = {}) {
    let replayed = false;
    for (let attempt = 0; ; attempt++) {
      const token = await this.#accessToken();
      const response = await this.#options.fetch(`${this.#options.baseUrl}${API}${path}`, {
        headers: { ...options.headers, authorization: `Bearer ${token}` },
        ...(options.signal ? { signal: options.signal } : {}),
      });
      if (response.ok) return response;
      const error = await toError(response);
      if (error.status === 401 && !replayed) {
        replayed = true;
        if (this.#token?.value === token) this.#token = undefined;
        attempt--;
        continue;
      }
      const wait = this.#retryDelay(error, 'GET', false, attempt);
      if (wait === undefined) throw error;
      await this.#options.sleep(wait);
    }
  }
  /** How this client waits (tests make it instant). */
  sleep(ms) {
    return this.#options.sleep(ms);
  }
  /** Milliseconds before the next attempt, or undefined when the table says not to retry. */
  #retryDelay(error, method, hasKey, attempt) {
    if (attempt >= this.#options.maxRetries) return undefined;
    const backoff = Math.min(30_000, 500 * 2 ** attempt) * (0.5 + Math.random() / 2);
    const known = RETRY_AFTER_CODES.has(error.code);
    const byStatus = !known && (error.status === 429 || error.status === 503);
    if (known || byStatus) return error.retryAfter !== undefined ? error.retryAfter * 1000 : backoff;
    // INTERNAL_ERROR (or an unknown 5xx): only when repeating cannot act twice.
    if (error.status >= 500 && (method === 'GET' || hasKey)) return backoff;
    return undefined;
  }
  async #send(method, path, options, token, idempotencyKey) {
    const url = new URL(`${this.#options.baseUrl}${API}${path}`);
    for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    const headers = { authorization: `Bearer ${token}` };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    return this.#options.fetch(url, { method, headers, ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}) });
  }
  /** Token handling rules 1–3: cached, refreshed 60 s early, one exchange for any number of waiting calls. */
  async #accessToken() {
    if (this.#token && this.#options.now() < this.#token.expiresAt - REFRESH_EARLY_MS) return this.#token.value;
    this.#exchanging ??= this.#exchange().finally(() => {
      this.#exchanging = undefined;
    });
    return this.#exchanging;
  }
  async #exchange() {
    for (let attempt = 0; ; attempt++) {
      const response = await this.#options.fetch(`${this.#options.baseUrl}${API}/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ api_key: this.#options.apiKey }),
      });
      if (response.ok) {
        const body = await response.json();
        this.#token = { value: body.access_token, expiresAt: this.#options.now() + body.expires_in * 1000 };
        return body.access_token;
      }
      const error = await toError(response);
      // PARTNER_NOT_READY, UNAVAILABLE and RATE_LIMITED say when to come back; anything else is final.
      const wait = this.#retryDelay(error, 'POST', false, attempt);
      if (wait === undefined) throw error;
      await this.#options.sleep(wait);
    }
  }
}
async function toError(response) {
  const retryAfterHeader = response.headers.get('retry-after');
  const retryAfter = retryAfterHeader !== null && /^\d+$/.test(retryAfterHeader) ? Number(retryAfterHeader) : undefined;
  let envelope = {};
  try {
    envelope = await response.json();
  } catch {
    // Not the envelope (a proxy's page): the status speaks.
  }
  const error = envelope.error ?? {};
  return new TenantryError({
    code: error.code ?? `HTTP_${response.status}`,
    status: response.status,
    message: error.message ?? `HTTP ${response.status}`,
    ...((error.request_id ?? response.headers.get('x-request-id'))
      ? { requestId: error.request_id ?? response.headers.get('x-request-id') ?? '' }
      : {}),
    ...(error.details ? { details: error.details } : {}),
    ...(retryAfter !== undefined ? { retryAfter } : {}),
  });
}
