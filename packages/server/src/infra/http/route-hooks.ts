import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { answerInstead } from './error-handler.ts';

type HookName = 'onRequest' | 'preHandler' | 'onSend';

/**
 * Appends a hook to one route's own hooks, from an `onRoute` hook: a plugin attaches its work only to
 * the routes that need it (idempotency to mutating routes, authentication to each route), and the
 * route's hooks declared with it run first. An `onSend` hook that fails answers in the envelope
 * (`answersItsFailure`).
 */
export function appendRouteHook<Name extends HookName>(route: RouteOptions, name: Name, hook: NonNullable<RouteOptions[Name]>): void {
  const existing = route[name];
  const hooks = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
  const added: unknown[] = Array.isArray(hook) ? hook : [hook];
  (route as Record<HookName, unknown>)[name] = [
    ...hooks,
    ...(name === 'onSend' ? added.map((h) => answersItsFailure(h as OnSend)) : added),
  ];
}

type OnSend = (
  this: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done?: (error: Error | null, payload?: unknown) => void,
) => unknown;

/**
 * An `onSend` hook runs once the answer is chosen, and the error handler has often chosen it: an error
 * the hook throws then goes to Fastify's default handler, which answers outside the envelope with the
 * error's own words (a database's "terminating connection due to administrator command"). The error
 * is answered here instead, as the error handler answers it. Callback-style hooks (four parameters)
 * and async ones are both run.
 */
function answersItsFailure(hook: OnSend): OnSend {
  return async function (this: unknown, request, reply, payload) {
    try {
      if (hook.length < 4) return await hook.call(this, request, reply, payload);
      return await new Promise((resolve, reject) =>
        hook.call(this, request, reply, payload, (error, next) => (error ? reject(error) : resolve(next))),
      );
    } catch (error) {
      return answerInstead(error, request, reply);
    }
  };
}
