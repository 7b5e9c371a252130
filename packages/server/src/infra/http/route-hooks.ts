import type { RouteOptions } from 'fastify';

type HookName = 'onRequest' | 'preHandler' | 'onSend';

/**
 * Appends a hook to one route's own hooks, from an `onRoute` hook: a plugin attaches its work only to
 * the routes that need it (idempotency to mutating routes, authentication to each route), and the
 * route's hooks declared with it run first.
 */
export function appendRouteHook<Name extends HookName>(route: RouteOptions, name: Name, hook: NonNullable<RouteOptions[Name]>): void {
  const existing = route[name];
  const hooks = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
  (route as Record<HookName, unknown>)[name] = [...hooks, ...(Array.isArray(hook) ? hook : [hook])];
}
