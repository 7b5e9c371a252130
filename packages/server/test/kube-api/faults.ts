/** What the double knows of a request when it decides on a fault, and what it records in its log. */
export interface RequestInfo {
  method: string;
  /** The path without the query. */
  path: string;
  query: URLSearchParams;
  verb: 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'discovery' | 'other';
  group?: string;
  version?: string;
  /** The plural resource name (`services`). */
  resource?: string;
  namespace?: string;
  name?: string;
  subresource?: string;
  /** The user the bearer token belongs to. */
  user?: string;
}

export interface LoggedRequest extends RequestInfo {
  status: number;
  at: number;
}

export type RequestMatcher = (request: RequestInfo) => boolean;

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export function isWrite(request: RequestInfo): boolean {
  return WRITE_VERBS.has(request.verb);
}

interface Failure {
  remaining: number;
  match: RequestMatcher;
  status: number;
  reason: string;
  message: string;
}

interface Delay {
  remaining: number;
  match: RequestMatcher;
  ms: number;
}

/**
 * Faults to inject: failing requests with a chosen status, a forced optimistic-concurrency conflict, slow
 * answers. Dropping watches and compacting the history live on the server, which owns the streams.
 */
export class Faults {
  readonly #failures: Failure[] = [];
  readonly #delays: Delay[] = [];

  /** Fails the next `count` requests that match (all requests when no matcher) with `status`. */
  failNext(options: { count?: number; status?: number; reason?: string; message?: string; match?: RequestMatcher } = {}): void {
    const status = options.status ?? 500;
    this.#failures.push({
      remaining: options.count ?? 1,
      match: options.match ?? (() => true),
      status,
      reason:
        options.reason ??
        (status === 429 ? 'TooManyRequests' : status === 503 ? 'ServiceUnavailable' : status === 403 ? 'Forbidden' : 'InternalError'),
      message: options.message ?? `injected failure (${status})`,
    });
  }

  /** The next write that matches answers 409 Conflict, as if another client had written first. */
  conflictNextWrite(match: RequestMatcher = () => true): void {
    this.#failures.push({
      remaining: 1,
      match: (r) => isWrite(r) && r.verb !== 'delete' && match(r),
      status: 409,
      reason: 'Conflict',
      message: 'Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again',
    });
  }

  /** Holds the next `count` matching requests (every one when count is omitted) for `ms` before answering. */
  delay(ms: number, options: { count?: number; match?: RequestMatcher } = {}): void {
    this.#delays.push({ remaining: options.count ?? Number.POSITIVE_INFINITY, match: options.match ?? (() => true), ms });
  }

  clear(): void {
    this.#failures.length = 0;
    this.#delays.length = 0;
  }

  /** The failure to answer with, consuming one use of it. */
  takeFailure(request: RequestInfo): Failure | undefined {
    const failure = this.#failures.find((f) => f.remaining > 0 && f.match(request));
    if (failure) failure.remaining -= 1;
    return failure;
  }

  takeDelay(request: RequestInfo): number {
    const delay = this.#delays.find((d) => d.remaining > 0 && d.match(request));
    if (!delay) return 0;
    delay.remaining -= 1;
    return delay.ms;
  }
}
