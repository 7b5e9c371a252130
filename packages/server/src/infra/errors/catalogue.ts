/**
 * Every error code of the partner API, once, with its HTTP status and whether
 * a client may retry it. The envelope, headers and logging live in
 * `error-handler.ts`; services throw `ApiError` with one of these codes.
 */
export const ERROR_CATALOGUE = {
  VALIDATION_ERROR: { status: 400, retryable: false },
  QUOTA_EXCEEDED: { status: 400, retryable: false },
  NOT_CONFIGURED: { status: 400, retryable: false },
  UNAUTHORIZED: { status: 401, retryable: false },
  FORBIDDEN: { status: 403, retryable: false },
  PARTNER_SUSPENDED: { status: 403, retryable: false },
  LIMIT_REACHED: { status: 403, retryable: false },
  PLAN_NOT_ALLOWED: { status: 403, retryable: false },
  GPU_PROFILE_NOT_ALLOWED: { status: 403, retryable: false },
  NOT_FOUND: { status: 404, retryable: false },
  UPSTREAM_NOT_FOUND: { status: 404, retryable: false },
  METHOD_NOT_ALLOWED: { status: 405, retryable: false },
  /** Headers over Node's limit, answered before any route is known. */
  HEADERS_TOO_LARGE: { status: 431, retryable: false },
  ALREADY_EXISTS: { status: 409, retryable: false },
  CONFLICT: { status: 409, retryable: false },
  NOT_READY: { status: 409, retryable: true },
  BUSY: { status: 409, retryable: true },
  CUSTOMER_CAPACITY_EXCEEDED: { status: 409, retryable: false },
  PARTNER_CAPACITY_EXCEEDED: { status: 409, retryable: false },
  GPU_ENTITLEMENT_REDUCTION_BLOCKED: { status: 409, retryable: false },
  USER_ACTION_REQUIRED: { status: 409, retryable: false },
  IDEMPOTENCY_KEY_REUSED: { status: 409, retryable: false },
  IDEMPOTENCY_KEY_IN_PROGRESS: { status: 409, retryable: true },
  RATE_LIMITED: { status: 429, retryable: true },
  TOO_MANY_OPERATIONS: { status: 429, retryable: true },
  INTERNAL_ERROR: { status: 500, retryable: true },
  UNAVAILABLE: { status: 503, retryable: true },
  PARTNER_NOT_READY: { status: 503, retryable: true },
  GPU_USAGE_UNAVAILABLE: { status: 503, retryable: true },
} as const satisfies Record<string, { status: number; retryable: boolean }>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export type ErrorDetails = Record<string, unknown>;

/** One problem with one input, as listed in `details.errors` of VALIDATION_ERROR. */
export interface FieldProblem {
  /** Where the input was: `body`, `query`, `path` or `header`. */
  in: 'body' | 'query' | 'path' | 'header';
  /** The field, as a dotted path (`owner.email`), or `""` for the whole part. */
  field: string;
  message: string;
}

/**
 * An answer to the client in the error envelope: expected, not a fault, so it carries no stack trace.
 * Capturing one costs 6 to 14 µs for every 401, 404 or 429, which a flood of bad requests pays;
 * unexpected errors keep theirs for the log.
 */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: ErrorDetails | undefined;
  /** Seconds, sent as `Retry-After`. */
  readonly retryAfter: number | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: ErrorDetails; retryAfter?: number; headers?: Record<string, string> } = {},
  ) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.name = 'ApiError';
    this.code = code;
    this.status = ERROR_CATALOGUE[code].status;
    this.details = options.details;
    this.retryAfter = options.retryAfter;
    this.headers = options.headers;
  }
}

/** 400 VALIDATION_ERROR listing each problem; `extra` adds details beside `errors` (such as `known_events`). */
export function validationError(problems: FieldProblem[], message?: string, extra?: ErrorDetails): ApiError {
  const first = problems[0];
  const summary =
    message ??
    (first
      ? `${first.field ? `${first.in}.${first.field}` : first.in}: ${first.message}${problems.length > 1 ? ` (and ${problems.length - 1} more)` : ''}`
      : 'The request is invalid.');
  return new ApiError('VALIDATION_ERROR', summary, { details: { errors: problems, ...extra } });
}

export const notFound = (what = 'The resource'): ApiError => new ApiError('NOT_FOUND', `${what} does not exist.`);
