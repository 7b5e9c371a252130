import type { IncomingMessage, ServerResponse } from 'node:http';
import { atEndOfTurn } from '../infra/end-of-turn.ts';
import { newId } from '../infra/ids.ts';
import type { RouteAccessLog } from '../infra/log/access-line.ts';
import type { RateDecision } from '../infra/rate-limit/gcra.ts';
import type { AuthService } from './service.ts';

/**
 * `GET /auth/whoami` answered before the framework (decision 252). A partner's backend calls it to check
 * its token, often; everything its answer needs is in memory once the token has been seen: the verified
 * token, its key and partner in their caches, a rate-limit decision that needs no I/O. Such a request
 * gets the route's answer here (the same bytes, headers and log line), at about three quarters of the
 * route's CPU cost: no framework request and reply objects, hooks, promise or serialiser.
 *
 * Everything else goes to the route in `routes.ts`, which stays the authority and answers with the
 * reason: a query string, a body, no Host, no token or a repeated Authorization header, a token that
 * does not verify or has expired, a key or partner not in its cache, a suspended partner, a rate-limit
 * decision that needs I/O (a new lease) or refuses. Nothing is taken from a bucket before the request
 * is known to be answered here, so a request handed over is charged once, by the route.
 */
export function whoamiFastPath(deps: {
  auth: AuthService;
  /** The route's URL, prefix included: only a request for exactly this URL is answered here. */
  path: string;
  /** The route's access line (`routeAccessLog` with the API's name, GET and `path`). */
  accessLog: RouteAccessLog;
}): (request: IncomingMessage, response: ServerResponse) => boolean {
  const { auth, path, accessLog } = deps;
  /** Writes one answer, with the other responses of this turn of the event loop (decision 249). */
  const write = (answer: Answer): void => {
    const { response, rate } = answer;
    response.writeHead(200, [
      'x-request-id',
      answer.id,
      'cache-control',
      'no-store',
      'x-ratelimit-limit',
      String(rate.limit),
      'x-ratelimit-remaining',
      String(rate.remaining),
      'content-type',
      'application/json; charset=utf-8',
      'content-length',
      answer.length,
    ]);
    response.end(answer.json);
    accessLog(answer.id, answer.partnerId, 200, Math.round((performance.now() - answer.startedMs) * 100) / 100);
  };
  return (request, response) => {
    if (request.url !== path || request.method !== 'GET') return false;
    const startedMs = performance.now();
    const authorization = soleAuthorization(request.rawHeaders);
    if (authorization === undefined) return false;
    const principal = auth.peek(authorization);
    if (principal === undefined) return false;
    const rate = auth.takePartnerRequestNow(principal.partner);
    if (rate === undefined || !rate.allowed) return false;
    const { json, length } = auth.whoamiJson(principal);
    atEndOfTurn(write, { response, id: newId('request'), rate, json, length, partnerId: principal.partner.id, startedMs });
    return true;
  };
}

interface Answer {
  response: ServerResponse;
  id: string;
  rate: RateDecision;
  json: string;
  /** The body's length in bytes, as the header's text. */
  length: string;
  partnerId: string;
  startedMs: number;
}

/**
 * The request's one Authorization header, read from the raw list without building `request.headers`;
 * undefined, to leave the request to the route, when it has none or several, no Host, or a body.
 */
function soleAuthorization(rawHeaders: string[]): string | undefined {
  let host = false;
  let authorization: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    switch (name.length) {
      case 4:
        if (name === 'Host' || name === 'host' || name.toLowerCase() === 'host') host = true;
        break;
      case 13:
        if (name === 'Authorization' || name === 'authorization' || name.toLowerCase() === 'authorization') {
          if (authorization !== undefined) return undefined;
          authorization = rawHeaders[i + 1] as string;
        }
        break;
      case 14:
        if (name === 'content-length' || name === 'Content-Length' || name.toLowerCase() === 'content-length') return undefined;
        break;
      case 17:
        if (name === 'transfer-encoding' || name === 'Transfer-Encoding' || name.toLowerCase() === 'transfer-encoding') return undefined;
        break;
    }
  }
  return host ? authorization : undefined;
}
