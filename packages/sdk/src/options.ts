import { timerSleep } from './abort.ts';
import { VERSION } from './version.ts';

export interface ClientOptions {
  /** `tnt_live_...` or `tnt_test_...`. */
  apiKey: string;
  /** The service's origin, e.g. `https://api.example.com` (http or https). */
  baseUrl: string;
  /** Milliseconds each HTTP request may take, from sending it to the end of its body. Default 30 000. */
  timeout?: number;
  /** Retries after the first attempt, for the codes the error table says to retry. Default 3. */
  maxRetries?: number;
  /**
   * The longest `Retry-After` (seconds) the client waits for before retrying. Default 60. An answer asking
   * for longer is thrown at once, its `retryAfter` telling when to come back.
   */
  maxRetryAfter?: number;
  fetch?: typeof fetch;
  /** The clock (ms), for token expiry. */
  now?: () => number;
  /** How the client waits between attempts (tests make it instant); `signal` aborts the wait. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** What every call takes as its last argument. */
export interface ReadOptions {
  /** Milliseconds each HTTP request of this call may take (the client's `timeout` when absent). */
  timeout?: number;
  /** Aborts the call, also while it waits to retry: it rejects with the signal's `reason`. */
  signal?: AbortSignal;
}

/** A mutating call's options: also the `Idempotency-Key` to send (generated when absent, kept across retries). */
export interface CallOptions extends ReadOptions {
  idempotencyKey?: string;
}

export interface RequestOptions extends CallOptions {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_RETRY_AFTER_S = 60;

export interface Settings {
  apiKey: string;
  /** Without a trailing slash. */
  baseUrl: string;
  timeout: number;
  maxRetries: number;
  maxRetryAfter: number;
  fetch: typeof fetch;
  now: () => number;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Absent where a runtime forbids setting it (browsers). */
  userAgent: string | undefined;
}

/** The constructor's checks: a clear message for what is missing or wrong, before any request is made. */
export function settings(options: ClientOptions | undefined): Settings {
  const given = (options ?? {}) as Partial<Record<keyof ClientOptions, unknown>>;
  const missing = [
    typeof given.apiKey === 'string' && given.apiKey !== '' ? undefined : 'apiKey (the tnt_live_... or tnt_test_... key)',
    typeof given.baseUrl === 'string' && given.baseUrl !== '' ? undefined : 'baseUrl (the service origin, e.g. https://api.example.com)',
  ].filter((name) => name !== undefined);
  if (missing.length > 0) throw new TypeError(`new Tenantry(): missing ${missing.join(' and ')}`);
  const baseUrl = given.baseUrl as string;
  let parsed: URL | undefined;
  try {
    parsed = new URL(baseUrl);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new TypeError(`new Tenantry(): baseUrl must be an http:// or https:// URL, got ${JSON.stringify(baseUrl)}`);
  }
  return {
    apiKey: given.apiKey as string,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    timeout: checkTimeout(given.timeout, 'new Tenantry(): timeout') ?? DEFAULT_TIMEOUT_MS,
    maxRetries: check(given.maxRetries, 'maxRetries', 'a whole number ≥ 0', (n) => Number.isInteger(n) && n >= 0) ?? 3,
    maxRetryAfter: check(given.maxRetryAfter, 'maxRetryAfter', 'a number of seconds ≥ 0', (n) => n >= 0) ?? DEFAULT_MAX_RETRY_AFTER_S,
    fetch: (given.fetch as typeof fetch | undefined) ?? globalThis.fetch.bind(globalThis),
    now: (given.now as (() => number) | undefined) ?? (() => Date.now()),
    sleep: (given.sleep as Settings['sleep'] | undefined) ?? timerSleep,
    userAgent: userAgent(),
  };
}

function check(value: unknown, name: string, what: string, valid: (n: number) => boolean): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || Number.isNaN(value) || !valid(value)) {
    throw new TypeError(`new Tenantry(): ${name} must be ${what}, got ${String(value)}`);
  }
  return value;
}

/** A positive number of milliseconds (`Infinity` for none), or undefined for the default. */
export function checkTimeout(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !(value > 0))
    throw new TypeError(`${name} must be a positive number of milliseconds, got ${String(value)}`);
  return value;
}

/** `tenantry-sdk/<version> node/<version>` on Node (and runtimes that present themselves as Node). */
function userAgent(): string | undefined {
  const node = (globalThis as { process?: { versions?: { node?: unknown } } }).process?.versions?.node;
  return typeof node === 'string' ? `tenantry-sdk/${VERSION} node/${node}` : undefined;
}
