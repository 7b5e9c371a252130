import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { validationError } from '../infra/errors/catalogue.ts';
import type { RateDecision } from '../infra/rate-limit/gcra.ts';
import type { Scope } from './scopes.ts';
import { type AuthService, type Principal, rateLimited, rateLimitHeaders, requireScope } from './service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a route needs; `any` for any valid token. Routes without it are public. */
    scope?: Scope | 'any';
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
 */
export const authenticatePlugin = fp(
  async (app: FastifyInstance, opts: { auth: AuthService }) => {
    const { auth } = opts;
    // Callback style with synchronous fast paths: a cached partner and a local
    // rate-limit decision cost no promise.
    app.addHook('onRequest', (request, reply, done) => {
      const scope = request.routeOptions.config.scope;
      if (scope === undefined) return done();
      // Answers to authenticated calls are about one partner's data: no cache on the way keeps them.
      reply.header('cache-control', 'no-store');
      if (sentMoreThanOnce(request.raw.rawHeaders, 'authorization')) {
        return done(validationError([{ in: 'header', field: 'authorization', message: 'was sent more than once; send one' }]));
      }
      const admit = (rate: RateDecision) => {
        reply.headers(rateLimitHeaders(rate));
        if (!rate.allowed) throw rateLimited(rate, 'The partner rate limit is exhausted.');
        if (scope !== 'any' && request.principal) requireScope(request.principal, scope);
      };
      const withPrincipal = (principal: Principal): void | Promise<void> => {
        request.principal = principal;
        request.logPartnerId = principal.partner.id;
        const rate = auth.takePartnerRequest(principal.partner);
        return rate instanceof Promise ? rate.then(admit) : admit(rate);
      };
      try {
        const principal = auth.authenticate(request.headers.authorization);
        const pending = principal instanceof Promise ? principal.then(withPrincipal) : withPrincipal(principal);
        if (pending instanceof Promise) pending.then(() => done(), done);
        else done();
      } catch (error) {
        done(error as Error);
      }
    });
  },
  { name: 'tenantry-authenticate' },
);

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
