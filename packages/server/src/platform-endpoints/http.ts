import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { http } from '../infra/http/node-http.ts';
import type { EndpointManager } from './manager.ts';

/**
 * `/healthz` (the process answers: liveness), `/readyz` (every watch has listed: readiness) and `/metrics`
 * (Prometheus text format).
 */
export async function serveManagerHttp(manager: EndpointManager, host: string, port: number): Promise<{ server: Server; url: string }> {
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/healthz') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', leader: manager.isLeader() }));
      return;
    }
    if (path === '/readyz') {
      const ready = manager.ready;
      response
        .writeHead(ready ? 200 : 503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: ready ? 'ready' : 'syncing', leader: manager.isLeader(), endpoints: manager.endpoints }));
      return;
    }
    if (path === '/metrics') {
      manager.metrics.registry.metrics().then(
        (text) => response.writeHead(200, { 'content-type': manager.metrics.registry.contentType }).end(text),
        () => response.writeHead(500).end(),
      );
      return;
    }
    response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'not found' }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return { server, url: `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}` };
}
