import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { http } from '../infra/http/node-http.ts';
import type { EndpointSettings } from './annotations.ts';

export interface ProbeResult {
  healthy: boolean;
  /** HTTP status, when one came back. */
  status?: number;
  /** Why it failed: the status, a timeout or the network error code. */
  reason?: string;
  latencyMs: number;
}

export type Probe = (address: string, health: EndpointSettings['health']) => Promise<ProbeResult>;

/**
 * One health check of one node, as the seed specifies: GET <scheme>://<ip>:<port><path>; with a health host
 * the TLS SNI and the Host header carry it, without one there is no SNI (the bare IP). Each probe opens its
 * own connection (no agent, no keep-alive), so a dead node is never hidden behind a pooled socket. Healthy
 * when the status is at most `statusMax`. The timeout covers connect, handshake and response headers.
 */
export const probeNode: Probe = (address, health) =>
  new Promise((resolve) => {
    const started = performance.now();
    let settled = false;
    const finish = (result: Omit<ProbeResult, 'latencyMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, latencyMs: performance.now() - started });
    };
    const hostHeader = health.host ?? (isIP(address) === 6 ? `[${address}]` : address);
    const options = {
      host: address,
      port: health.port,
      path: health.path,
      method: 'GET',
      agent: false as const,
      headers: {
        host: health.host ? `${health.host}:${health.port}` : `${hostHeader}:${health.port}`,
        'user-agent': 'tenantry-endpoint-manager',
        connection: 'close',
      },
    };
    const request =
      health.scheme === 'https'
        ? httpsRequest({
            ...options,
            // An empty servername sends no SNI at all; Node would otherwise derive one from the Host header.
            servername: health.host ?? '',
            rejectUnauthorized: !health.insecureSkipVerify,
          })
        : http.request(options);
    const timer = setTimeout(() => {
      finish({ healthy: false, reason: `timeout after ${health.timeoutMs} ms` });
      request.destroy();
    }, health.timeoutMs);
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      response.resume();
      request.destroy();
      finish(
        status <= health.statusMax && status >= 100 ? { healthy: true, status } : { healthy: false, status, reason: `HTTP ${status}` },
      );
    });
    request.on('error', (error: NodeJS.ErrnoException) => finish({ healthy: false, reason: error.code ?? error.message }));
    request.end();
  });
