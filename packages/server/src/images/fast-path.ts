import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { CONSOLE_COOKIE } from '../console/service.ts';
import type { ConsoleSessionCache } from '../console/session-cache.ts';
import { atEndOfTurn } from '../infra/end-of-turn.ts';
import { newId } from '../infra/ids.ts';
import type { OsImageCatalogue } from './catalogue.ts';

const PATH = /^\/api\/create-vm\/([a-z0-9-]{1,63})\/os-images$/;
const ROUTE = '/api/create-vm/:namespace/os-images';
const COOKIE_PREFIX = `${CONSOLE_COOKIE}=`;

/** How often the reads answered here are summed up in one log line. */
const SUMMARY_EVERY_MS = 60_000;

/** The fast path as the HTTP server uses it: `answer` per request, `close` when the server stops. */
export interface OsImagesFastPath {
  /** Answers the request and returns true, or returns false to let the framework answer it. */
  answer(request: IncomingMessage, response: ServerResponse): boolean;
  /** Writes the summary of what was answered since the last one (if anything), and stops the timer. */
  close(): void;
}

/**
 * The console's hot read answered before the framework (decision 143): a GET of
 * `/api/create-vm/{namespace}/os-images` whose session is in the per-process cache and owns the namespace
 * gets the catalogue's bytes at once, with the same headers as the route. Everything else (no cookie, a
 * session not cached, another namespace, a query string, any error) falls through to the Fastify route
 * in `routes.ts`, which stays the authority, answers in the error envelope and logs a line per request.
 *
 * What is answered here is logged per request at `debug` only; at `info`, one line a minute counts them
 * (decision 204): the console asks for this list on every form it shows, and the line cost more than
 * the answer.
 */
export function osImagesFastPath(deps: {
  access: ConsoleSessionCache;
  images: OsImageCatalogue;
  logger: Logger;
  api: string;
}): OsImagesFastPath {
  const { access, images, logger, api } = deps;
  let answered = 0;
  let windowStartedMs = Date.now();
  const summarise = () => {
    const nowMs = Date.now();
    if (answered > 0) {
      logger.info(
        { api, method: 'GET', route: ROUTE, status: 200, requests: answered, window_s: Math.round((nowMs - windowStartedMs) / 1000) },
        'requests answered from memory',
      );
    }
    answered = 0;
    windowStartedMs = nowMs;
  };
  const timer = setInterval(summarise, SUMMARY_EVERY_MS).unref();
  return {
    answer(request, response) {
      if (request.method !== 'GET') return false;
      const match = PATH.exec(request.url ?? '');
      if (!match) return false;
      const sessionId = sessionCookie(request.rawHeaders);
      if (!sessionId) return false;
      const session = access.peek(sessionId);
      if (!session?.projects.some((project) => project.namespace === match[1])) return false;
      const id = newId('request');
      atEndOfTurn(write, { response, id, body: images.json() });
      answered++;
      if (logger.isLevelEnabled('debug')) {
        logger.debug({ api, request_id: id, method: 'GET', route: ROUTE, status: 200, from_memory: true }, 'request');
      }
      return true;
    },
    close() {
      clearInterval(timer);
      summarise();
    },
  };
}

/** Writes one answer, with the other responses of this turn of the event loop (decision 249, as whoami's). */
function write(answer: { response: ServerResponse; id: string; body: Buffer }): void {
  // A flat list: node:http writes it as it is, with no object to walk.
  answer.response.writeHead(200, [
    'x-request-id',
    answer.id,
    'content-type',
    'application/json; charset=utf-8',
    'cache-control',
    'private, no-store',
    'content-length',
    String(answer.body.length),
  ]);
  answer.response.end(answer.body);
}

/**
 * The console cookie from the raw header list, read without building `request.headers` (only a request
 * that falls through to the framework needs that object). A request without Host has none: the
 * framework refuses it in the envelope.
 */
function sessionCookie(rawHeaders: string[]): string | undefined {
  let host = false;
  let session: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === 4 && name.toLowerCase() === 'host') host = true;
    else if (session === undefined && name.length === 6 && name.toLowerCase() === 'cookie') session = cookieValue(rawHeaders[i + 1]);
  }
  return host ? session : undefined;
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
