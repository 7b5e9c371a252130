import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { CONSOLE_COOKIE } from '../console/service.ts';
import type { ConsoleSessionCache } from '../console/session-cache.ts';
import { newId } from '../infra/ids.ts';
import type { OsImageCatalogue } from './catalogue.ts';

const PATH = /^\/api\/create-vm\/([a-z0-9-]{1,63})\/os-images$/;
const ROUTE = '/api/create-vm/:namespace/os-images';
const COOKIE_PREFIX = `${CONSOLE_COOKIE}=`;

/**
 * The console's hot read answered before the framework (decision 143): a GET of
 * `/api/create-vm/{namespace}/os-images` whose session is in the per-process cache and owns the namespace
 * gets the catalogue's bytes at once, with the same headers and log line as the route. Everything else
 * (no cookie, a session not cached, another namespace, a query string, any error) falls through to the
 * Fastify route in `routes.ts`, which stays the authority and answers in the error envelope.
 */
export function osImagesFastPath(deps: { access: ConsoleSessionCache; images: OsImageCatalogue; logger: Logger; api: string }) {
  const { access, images, logger, api } = deps;
  return (request: IncomingMessage, response: ServerResponse): boolean => {
    if (request.method !== 'GET') return false;
    const match = PATH.exec(request.url ?? '');
    if (!match) return false;
    const sessionId = cookieValue(request.headers.cookie);
    if (!sessionId) return false;
    const session = access.peek(sessionId);
    if (!session?.projects.some((project) => project.namespace === match[1])) return false;
    const started = performance.now();
    const id = newId('request');
    const body = images.json();
    response.writeHead(200, {
      'x-request-id': id,
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'private, no-store',
      'content-length': body.length,
    });
    response.end(body);
    logger.info(
      { api, request_id: id, method: 'GET', route: ROUTE, status: 200, latency_ms: Math.round((performance.now() - started) * 100) / 100 },
      'request',
    );
    return true;
  };
}

/** The console cookie's value; session ids are base64url, so no decoding is needed (anything else falls through). */
function cookieValue(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const trimmed = part.trim();
    if (trimmed.startsWith(COOKIE_PREFIX)) {
      const value = trimmed.slice(COOKIE_PREFIX.length);
      return /^[A-Za-z0-9_-]+$/.test(value) ? value : undefined;
    }
  }
  return undefined;
}
