import type { IncomingMessage, ServerResponse } from 'node:http';

/** What a handler answers: a status, a JSON body and headers (a `Location` for a 201). */
export interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * A refusal with the status and body Keycloak answers it with. Handlers throw it so that a refusal
 * in the middle of a request leaves nothing half done, as Keycloak's transaction rollback does.
 */
export class Refusal extends Error {
  readonly status: number;
  readonly body: unknown;

  constructor(status: number, body: unknown) {
    super(`HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export const ok = (body: unknown): Answer => ({ status: 200, body });
export const noContent = (): Answer => ({ status: 204 });
export const created = (location: string): Answer => ({ status: 201, headers: { location } });

/** `ErrorResponse.error/exists` (services/.../ErrorResponse.java): `{errorMessage}`. */
export const errorMessage = (status: number, message: string): Refusal => new Refusal(status, { errorMessage: message });

/**
 * A JAX-RS exception as KeycloakErrorHandler answers it: `{error: <exception message>}`, e.g.
 * NotFoundException("User not found") → 404 `{"error":"User not found"}`.
 */
export const jaxrs = (status: number, message: string): Refusal => new Refusal(status, { error: message });

export const forbidden = (): Refusal => jaxrs(403, 'HTTP 403 Forbidden');
export const notFound = (message = 'HTTP 404 Not Found'): Refusal => jaxrs(404, message);

/** An exception Keycloak does not map (a RuntimeException): 500 with `unknown_error`, and the transaction rolled back. */
export const unexpected = (): Refusal =>
  new Refusal(500, { error: 'unknown_error', error_description: 'For more on this error consult the server log.' });

export function send(response: ServerResponse, answer: Answer): void {
  const body = answer.body === undefined ? undefined : JSON.stringify(answer.body);
  response.writeHead(answer.status, { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...answer.headers });
  response.end(body);
}

export async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A JSON body; Keycloak answers a body it cannot parse with 400 `invalid_request` (KeycloakErrorHandler.getErrorCode). */
export function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new Refusal(400, { error: 'invalid_request', error_description: 'Unable to parse the request body.' });
  }
}

export type Json = Record<string, unknown>;

export const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
export const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
export const bool = (value: unknown): boolean | undefined => (typeof value === 'boolean' ? value : undefined);

/** A query parameter read as Keycloak's JAX-RS binding reads a Boolean: absent is null, anything but "true" is false. */
export function queryBool(query: URLSearchParams, name: string): boolean | undefined {
  const value = query.get(name);
  return value === null ? undefined : value.toLowerCase() === 'true';
}

export function queryInt(query: URLSearchParams, name: string): number | undefined {
  const value = query.get(name);
  if (value === null) return undefined;
  const parsed = Number.parseInt(value, 10);
  if (Number.isNaN(parsed)) throw notFound();
  return parsed;
}

/** `first`/`max` paging as the JPA providers apply it: a negative or absent `first` is 0. */
export function page<T>(items: T[], first: number | undefined, max: number | undefined): T[] {
  const from = first !== undefined && first > 0 ? first : 0;
  return max !== undefined && max >= 0 ? items.slice(from, from + max) : items.slice(from);
}
