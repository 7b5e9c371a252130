import { Agent, request } from 'node:http';
import type { ServeProcess } from '../test/serve-process.ts';
import { partnerToken } from './common.ts';

/** An answer as the bench reads it. */
export interface Answer {
  status: number;
  body: string;
}

/**
 * The bench's own calls to a server it measures: node:http with kept-alive sockets, as
 * many as there are calls at once. The load generator runs on the same two cores as the server and its
 * database; `fetch` costs it two to three times what this does a call (730–980 µs a create in a new
 * process, against 340–430), CPU the measured server would not get.
 */
export function keepAliveClient(base: string, headers: Record<string, string>) {
  const agent = new Agent({ keepAlive: true });
  const url = new URL(base);
  return (method: string, path: string, body?: unknown): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          method,
          path: url.pathname + path,
          headers:
            payload === undefined
              ? headers
              : { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
}

/** The partner API of `server` with a token of `key`, through `keepAliveClient`. */
export async function partnerClient(server: ServeProcess, key: string) {
  return keepAliveClient(`${server.partnerUrl}/api/public/v1`, { authorization: `Bearer ${await partnerToken(server, key)}` });
}
