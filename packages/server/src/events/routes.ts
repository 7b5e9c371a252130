import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AuthService } from '../auth/service.ts';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { type ErrorDetails, type FieldProblem, validationError } from '../infra/errors/catalogue.ts';
import { listOf } from '../infra/http/envelope.ts';
import { PageQuery } from '../infra/pagination/cursor.ts';
import { EVENT_TYPES } from './payloads.ts';
import { EVENT_ID, EventBody, EventStreamHeaders, EventStreamResponse } from './schemas.ts';
import type { EventService } from './service.ts';
import type { EventStreams } from './stream.ts';

const ListEventsQuery = Type.Object(
  { ...PageQuery, type: Type.Optional(Type.Enum(EVENT_TYPES, { description: 'Only events of this name.' })) },
  { additionalProperties: false },
);

/** An unknown `type` is named as such, with the names there are (as the webhook's filter does). */
function explainUnknownType(problems: FieldProblem[]): { problems: FieldProblem[]; details?: ErrorDetails } {
  const isType = (problem: FieldProblem) => problem.in === 'query' && problem.field === 'type';
  if (!problems.some(isType)) return { problems };
  return {
    problems: problems.map((problem) =>
      isType(problem) ? { ...problem, message: 'is not an event name; details.known_events lists them' } : problem,
    ),
    details: { known_events: [...EVENT_TYPES] },
  };
}

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  auth: AuthService;
  eventStreams: EventStreams;
  events: EventService;
  options: { clock: Clock };
}

/** CONTRACT §4, Events: every event body of the partner, newest first, kept 30 days; and the same events as a stream. */
export const eventRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { events, eventStreams, auth, options } = services;

  app.get(
    '/events',
    {
      config: { scope: 'customers:read', explainValidation: explainUnknownType },
      schema: {
        operationId: 'listEvents',
        tags: ['Events'],
        summary: 'List events, newest first (the polling twin of every webhook)',
        description:
          'Every event of the last 30 days, newest first, whether or not a webhook delivered it: the polling twin of the webhook, and authoritative. `type` takes one event name.',
        querystring: ListEventsQuery,
        response: { 200: listOf(EventBody, 'A page of events.') },
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

  app.get(
    '/events/stream',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'streamEvents',
        tags: ['Events'],
        summary: 'Stream events as they happen (server-sent events; `tenantry listen` reads it)',
        description:
          'Each event is one server-sent event: `id` is the event id, `event` its name, `data` the event body exactly as a ' +
          'webhook delivery carries it. A comment line arrives at least every 15 seconds. The stream ends when the token ' +
          'expires or the server shuts down; reconnect with a fresh token and `Last-Event-ID` to continue where it ended. ' +
          'Events are delivered at least once: a resume repeats the few seconds before `Last-Event-ID`, so deduplicate on ' +
          '`id`. A test token sees test events only.',
        headers: EventStreamHeaders,
        response: { 200: EventStreamResponse },
      },
    },
    async (request, reply) => {
      const tenant = requestTenant(request, options.clock);
      const authorization = request.headers.authorization;
      // Checked here: the header schema documents it, and validation of mixed-case header names is not to be relied on.
      const lastEventId = request.headers['last-event-id'];
      if (lastEventId !== undefined && (typeof lastEventId !== 'string' || !EVENT_ID.test(lastEventId))) {
        throw validationError([{ in: 'header', field: 'last-event-id', message: 'must be the id of an event (dlv_ and 26 characters)' }]);
      }
      const stream = eventStreams.open({
        partnerId: tenant.partnerId,
        mode: tenant.mode,
        lastEventId,
        stillAllowed: async () => {
          await auth.authenticate(authorization);
        },
      });
      // The client went away (or the response ended): stop polling for it.
      reply.raw.once('close', () => stream.destroy());
      return (
        reply
          .header('content-type', 'text/event-stream; charset=utf-8')
          .header('cache-control', 'no-store')
          .header('x-accel-buffering', 'no')
          // The document types the body as text; what is sent is that text, streamed.
          .send(stream as unknown as string)
      );
    },
  );

  // Open streams end first on shutdown, so draining does not wait for them.
  app.addHook('preClose', async () => eventStreams.closeAll());
};
