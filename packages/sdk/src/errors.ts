/** An error answered by the API, typed by its envelope; unknown codes keep their HTTP status. */
export class TenantryError extends Error {
  readonly code: string;
  /** The HTTP status; 0 when no answer came (`TenantryConnectionError`). */
  readonly status: number;
  readonly requestId: string | undefined;
  readonly details: Record<string, unknown> | undefined;
  /** Seconds, from `Retry-After`. */
  readonly retryAfter: number | undefined;
  constructor(init: {
    code: string;
    status: number;
    message: string;
    requestId?: string;
    details?: Record<string, unknown>;
    retryAfter?: number;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'TenantryError';
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
  }
}

/**
 * No HTTP answer: the connection was refused, reset or cut, the host name did not resolve, or TLS failed.
 * `status` is 0, `url` is where the request went and `cause` is the runtime's own error.
 */
export class TenantryConnectionError extends TenantryError {
  readonly method: string;
  readonly url: string;
  constructor(init: { method: string; url: string; cause?: unknown; code?: string; message?: string }) {
    super({
      code: init.code ?? 'CONNECTION_ERROR',
      status: 0,
      message: init.message ?? `${init.method} ${init.url} failed: ${describe(init.cause)}`,
      ...(init.cause === undefined ? {} : { cause: init.cause }),
    });
    this.name = 'TenantryConnectionError';
    this.method = init.method;
    this.url = init.url;
  }
}

/** The server did not answer (headers and whole body) within `timeout` milliseconds. */
export class TenantryTimeoutError extends TenantryConnectionError {
  readonly timeout: number;
  constructor(init: { method: string; url: string; timeout: number }) {
    super({ ...init, code: 'TIMEOUT', message: `${init.method} ${init.url}: no answer within ${init.timeout} ms` });
    this.name = 'TenantryTimeoutError';
    this.timeout = init.timeout;
  }
}

/** The innermost reason a runtime gives for a failed fetch (undici nests it: `fetch failed` ← `ECONNREFUSED`). */
function describe(cause: unknown): string {
  let error = cause as { message?: unknown; code?: unknown; cause?: unknown } | undefined;
  while (error?.cause && typeof error.cause === 'object') error = error.cause as typeof error;
  const message = typeof error?.message === 'string' ? error.message : '';
  const code = typeof error?.code === 'string' ? error.code : '';
  if (!message) return code || 'network error';
  return code && !message.includes(code) ? `${message} (${code})` : message;
}

/** The API's error envelope (or, from a proxy's page, just the status) as a `TenantryError`. */
export function toError(response: Response, text: string): TenantryError {
  const retryAfterHeader = response.headers.get('retry-after');
  const retryAfter = retryAfterHeader !== null && /^\d+$/.test(retryAfterHeader) ? Number(retryAfterHeader) : undefined;
  let envelope: { error?: { code?: string; message?: string; request_id?: string; details?: Record<string, unknown> } } = {};
  try {
    envelope = JSON.parse(text) as typeof envelope;
  } catch {
    // Not the envelope (a proxy's page): the status speaks.
  }
  const error = envelope?.error ?? {};
  const requestId = error.request_id ?? response.headers.get('x-request-id') ?? undefined;
  return new TenantryError({
    code: error.code ?? `HTTP_${response.status}`,
    status: response.status,
    message: error.message ?? `HTTP ${response.status}`,
    ...(requestId ? { requestId } : {}),
    ...(error.details ? { details: error.details } : {}),
    ...(retryAfter !== undefined ? { retryAfter } : {}),
  });
}
