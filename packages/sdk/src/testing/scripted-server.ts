import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * How the scripted server answers one request: an HTTP answer (an error envelope when `code` is set, an
 * event stream when `events` is set, else `{ data: { ok: true } }`), or a failure of the connection.
 */
export type Answer =
  | { status: number; code?: string; retryAfter?: number; events?: string }
  | 'hang' // reads the request and never answers
  | 'hang-body' // answers the headers and half a body, then nothing
  | 'reset'; // resets the TCP connection (RST)

export interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

/**
 * A node:http server in the test's process that answers each partner API request as scripted, in
 * order (`{ status: 200 }` once the script runs out). The token exchange answers from its own script.
 */
export async function scriptedServer(answers: Answer[], tokenAnswers: Answer[] = []) {
  const seen: Seen[] = [];
  const exchanges: Seen[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  let requestIds = 0;
  const server = createServer((request, response) => {
    const isToken = request.url?.endsWith('/auth/token') ?? false;
    const record = { method: request.method ?? '', url: request.url ?? '', headers: request.headers };
    (isToken ? exchanges : seen).push(record);
    for (const waiter of waiting.filter((w) => seen.length >= w.count)) waiter.resolve();
    const answer = (isToken ? tokenAnswers : answers).shift() ?? { status: 200 };
    if (answer === 'hang') return;
    if (answer === 'reset') {
      request.socket.resetAndDestroy();
      return;
    }
    const requestId = `req_${++requestIds}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': requestId };
    if (answer === 'hang-body') {
      response.writeHead(200, headers).write('{"status":"success","data":');
      return;
    }
    if (answer.retryAfter !== undefined) headers['retry-after'] = String(answer.retryAfter);
    if (answer.events !== undefined) {
      response.writeHead(answer.status, { ...headers, 'content-type': 'text/event-stream' }).end(answer.events);
      return;
    }
    const body = isToken
      ? { access_token: 't', expires_in: 900 }
      : answer.code
        ? { status: 'error', error: { code: answer.code, message: answer.code, request_id: requestId } }
        : { status: 'success', data: { ok: true }, pagination: { next_cursor: null } };
    response.writeHead(answer.status, headers).end(JSON.stringify(body));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    /** The partner API requests, token exchanges aside. */
    seen,
    exchanges,
    /** Resolves once `count` partner API requests have arrived. */
    arrived: (count: number) =>
      new Promise<void>((resolve) => {
        if (seen.length >= count) resolve();
        else waiting.push({ count, resolve });
      }),
    /** Stops listening and drops every connection: from now on connections are refused. */
    async stop() {
      server.closeAllConnections();
      if (!server.listening) return;
      server.close();
      await once(server, 'close');
    },
    /** Listens again on the same port. */
    async restart() {
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
  };
}
