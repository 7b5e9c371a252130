import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Services } from '../app/services.ts';
import { listOf } from '../infra/http/envelope.ts';
import { requestTenant } from '../platform/tenant.ts';
import { EventBody, ListEventsQuery } from './schemas.ts';

/** CONTRACT §4, Events: every event body of the partner, newest first, kept 30 days. */
export const eventRoutes: FastifyPluginAsyncTypebox<{ services: Services }> = async (app, { services }) => {
  const { events, options } = services;

  app.get(
    '/events',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'listEvents',
        summary: 'List events, newest first (the polling twin of every webhook)',
        querystring: ListEventsQuery,
        response: { 200: listOf(EventBody) },
      },
    },
    async (request) => ({
      status: 'success' as const,
      ...(await events.list(requestTenant(request, options.clock), {
        limit: request.query.limit ?? 50,
        cursor: request.query.cursor,
        type: request.query.type,
      })),
    }),
  );
};
