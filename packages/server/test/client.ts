import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { checkContract } from './contract.ts';

export interface HttpResult<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  /** The parsed JSON body (undefined when the body is not JSON). */
  body: T;
  text: string;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** Sent as is, with no content type added. */
  rawBody?: string;
  headers?: Record<string, string>;
  /** Ends the call early (`AbortSignal.timeout(ms)`: a call that must not wait fails instead of hanging). */
  signal?: AbortSignal;
}

export async function http<T = Record<string, unknown>>(
  baseUrl: string,
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  checkContract(method, `${baseUrl}${path}`, response.status, response.headers, parsed);
  return { status: response.status, headers: response.headers, body: parsed as T, text };
}

/**
 * What a server writes on `socket` until it closes the connection, as raw text (status line, headers,
 * body): for what `fetch` would hide or refuse to send.
 */
export function rawAnswer(socket: Socket): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let answer = '';
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('utf8');
    });
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

/**
 * Sends `request` as written to the server on `port` of 127.0.0.1 and reads until it closes. `halfClose`
 * ends the sending side at once (the request must then ask for no keep-alive, or be HTTP/1.0, for the
 * server to close); otherwise the request says `connection: close` itself.
 */
export function rawHttp(port: number, request: string, halfClose = true): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  const answer = rawAnswer(socket);
  if (halfClose) socket.end(request);
  else socket.write(request);
  return answer;
}

export const PARTNER_API = '/api/public/v1';
export const OPERATOR_API = '/api/operator/v1';

interface ServerUrls {
  partnerUrl: string;
  operatorUrl: string;
  operatorToken: string;
}

/** Partner API call with the prefix added. */
export const partnerApi = <T = Record<string, unknown>>(server: ServerUrls, method: string, path: string, options?: RequestOptions) =>
  http<T>(server.partnerUrl, method, `${PARTNER_API}${path}`, options);

/** Operator API call with the operator token. */
export const operatorApi = <T = Record<string, unknown>>(server: ServerUrls, method: string, path: string, options: RequestOptions = {}) =>
  http<T>(server.operatorUrl, method, `${OPERATOR_API}${path}`, { token: server.operatorToken, ...options });

export async function createPartner(server: ServerUrls, id: string, settings: Record<string, unknown> = {}) {
  const result = await operatorApi<{ data: Record<string, unknown> }>(server, 'POST', '/partners', {
    body: { id, display_name: `Partner ${id}`, ...settings },
  });
  assert.equal(result.status, 201, result.text);
  return result.body.data;
}

export async function issueKey(server: ServerUrls, partnerId: string, request: Record<string, unknown> = {}): Promise<string> {
  const result = await operatorApi<{ data: { key: string } }>(server, 'POST', `/partners/${partnerId}/keys`, { body: request });
  assert.equal(result.status, 201, result.text);
  return result.body.data.key;
}

export async function exchange(server: ServerUrls, apiKey: string) {
  return partnerApi<{ access_token: string; token_type: string; expires_in: number; scope: string }>(server, 'POST', '/auth/token', {
    body: { api_key: apiKey },
  });
}

/** A new partner with one key and a fresh token. */
export async function partnerWithToken(
  server: ServerUrls,
  id: string,
  options: { settings?: Record<string, unknown>; key?: Record<string, unknown> } = {},
): Promise<{ id: string; key: string; token: string }> {
  await createPartner(server, id, options.settings);
  const key = await issueKey(server, id, options.key);
  const result = await exchange(server, key);
  assert.equal(result.status, 200, result.text);
  return { id, key, token: result.body.access_token };
}

/** Asserts the error envelope, the code and the request id invariant; returns the error. */
export function assertError(
  // biome-ignore lint/suspicious/noExplicitAny: any response shape can carry an error.
  result: HttpResult<any>,
  status: number,
  code: string,
): { code: string; message: string; request_id: string; details?: Record<string, unknown> } {
  assert.equal(result.status, status, `expected ${status} ${code}, got ${result.status}: ${result.text}`);
  const body = result.body as {
    status: string;
    error: { code: string; message: string; request_id: string; details?: Record<string, unknown> };
  };
  assert.equal(body.status, 'error');
  assert.equal(body.error.code, code, result.text);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.equal(body.error.request_id, result.headers.get('x-request-id'));
  assert.match(body.error.request_id, /^req_[0-9a-z]{26}$/);
  assert.doesNotMatch(result.text, /at .+\.ts:\d+/, 'no stack trace in a response');
  return body.error;
}

/** The `details.errors` of a VALIDATION_ERROR. */
export function fieldErrors(error: { details?: Record<string, unknown> }): { in: string; field: string; message: string }[] {
  const errors = error.details?.errors;
  assert.ok(Array.isArray(errors), 'details.errors is a list');
  return errors as { in: string; field: string; message: string }[];
}
