import type {
  FastifyContextConfig,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  onRequestHookHandler,
} from 'fastify';
import fp from 'fastify-plugin';
import { notFound, validationError } from '../infra/errors/catalogue.ts';
import { appendRouteHook } from '../infra/http/route-hooks.ts';
import type { RateDecision } from '../infra/rate-limit/gcra.ts';
import type { Scope } from '../partners/scopes.ts';
import { type AuthService, type Principal, partnerSuspended, rateLimited, requireScope } from './service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a route needs; `any` for any valid token. Routes without it are public. */
    scope?: Scope | 'any';
    /** CONTRACT §5: only test-mode tokens reach the route; a live token gets 404, whatever its scopes. */
    testModeOnly?: boolean;
  }
  interface FastifyRequest {
    principal?: Principal;
  }
}

/**
 * Authenticates every route that declares a scope, before its body is read:
 * token, partner state, the partner's rate limit (headers on every
 * authenticated response), then the scope. Order matters: an unauthenticated
 * caller never learns about rate limits or scopes.
 *
 * The check is attached to each route as it is added (like idempotency's hooks) and reads the route's
 * own options: an authenticated request reads no `request.routeOptions` (Fastify builds that object
 * anew on every read). The options are read when a request comes, not when the hook is attached:
 * plugins registered later may still add to them (test mode marks its routes in an `onRoute` hook of
 * its own, which runs after this one). Route-level hooks run after the instance's, so the request id
 * and the host check still come first.
 */
export const authenticatePlugin = fp(
  async (app: FastifyInstance, opts: { auth: AuthService }) => {
    const { auth } = opts;
    app.addHook('onRoute', (route) => {
      const hook: onRequestHookHandler = (request, reply, done) => authenticateRequest(auth, route, request, reply, done);
      appendRouteHook(route, 'onRequest', hook);
    });
  },
  { name: 'tenantry-authenticate' },
);

/** What one route asks of a request's authentication. */
interface RouteCheck {
  auth: AuthService;
  scope: Scope | 'any';
  testModeOnly: boolean;
}

/**
 * Callback style with synchronous fast paths: a cached partner and a local rate-limit decision cost
 * no promise and no closure. The slow paths (a cache miss, a shared bucket's reservation) wait on
 * promises.
 */
function authenticateRequest(
  auth: AuthService,
  route: { config?: FastifyContextConfig },
  request: FastifyRequest,
  reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const scope = route.config?.scope;
  if (scope === undefined) {
    done();
    return;
  }
  const check: RouteCheck = { auth, scope, testModeOnly: route.config?.testModeOnly === true };
  // Answers to authenticated calls are about one partner's data: no cache on the way keeps them.
  reply.header('cache-control', 'no-store');
  if (sentMoreThanOnce(request.raw.rawHeaders, 'authorization')) {
    done(validationError([{ in: 'header', field: 'authorization', message: 'was sent more than once; send one' }]));
    return;
  }
  let pending: Promise<void> | undefined;
  try {
    const principal = auth.authenticate(request.headers.authorization, { allowSuspended: true });
    pending =
      principal instanceof Promise
        ? principal.then((found) => withPrincipal(check, request, reply, found))
        : withPrincipal(check, request, reply, principal);
  } catch (error) {
    done(error as Error);
    return;
  }
  if (pending === undefined) done();
  else pending.then(() => done(), done);
}

function withPrincipal(check: RouteCheck, request: FastifyRequest, reply: FastifyReply, principal: Principal): Promise<void> | undefined {
  request.principal = principal;
  request.logPartnerId = principal.partner.id;
  const rate = check.auth.takePartnerRequest(principal.partner);
  if (rate instanceof Promise) return rate.then((decided) => admit(check, reply, principal, decided));
  admit(check, reply, principal, rate);
  return undefined;
}

/** Every authenticated answer carries the rate-limit headers: a suspended partner's 403 too. */
function admit(check: RouteCheck, reply: FastifyReply, principal: Principal, rate: RateDecision): void {
  reply.header('x-ratelimit-limit', String(rate.limit));
  reply.header('x-ratelimit-remaining', String(rate.remaining));
  if (!rate.allowed) throw rateLimited(rate, 'The partner rate limit is exhausted.');
  if (principal.partner.status === 'suspended') throw partnerSuspended();
  if (check.testModeOnly && principal.claims.mode !== 'test') throw notFound('The route');
  if (check.scope !== 'any') requireScope(principal, check.scope);
}

/** Node keeps the first of repeated Authorization headers and drops the rest; a request that repeats it is refused. */
function sentMoreThanOnce(rawHeaders: string[], name: string): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const header = rawHeaders[i] as string;
    if (header.length === name.length && header.toLowerCase() === name && ++seen > 1) return true;
  }
  return false;
}

/** The principal of an authenticated route; its absence is a programming error. */
export function principalOf(request: { principal?: Principal }): Principal {
  if (!request.principal) throw new Error('route reached without authentication: declare config.scope');
  return request.principal;
}
