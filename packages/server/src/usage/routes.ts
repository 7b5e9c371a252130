import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { listOf, ok, success } from '../infra/http/envelope.ts';
import { CustomerParams } from '../platform/names.ts';
import { CustomerUsageQuery, UsageListQuery, UsageRecord } from './schemas.ts';
import type { UsageService } from './service.ts';

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  options: { clock: Clock };
  usage: UsageService;
}

/** partner-api.md, `GET /usage`, and CONTRACT §4, Capacity, usage (scope usage:read). */
export const usageRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { usage, options } = services;

  app.get(
    '/usage',
    {
      config: { scope: 'usage:read' },
      schema: {
        operationId: 'listUsage',
        tags: ['Usage'],
        summary: 'Usage of every customer in a window, by customer id',
        description:
          'Resource-hours of every customer in the window [`from`, `to`) of UTC days (default: the 7 days ending tonight), by customer id. Customers deleted within the window are listed with `deleted_at` and their usage until then. A window longer than `limits.max_usage_window_days` (whoami) answers 400 VALIDATION_ERROR.',
        querystring: UsageListQuery,
        response: { 200: listOf(UsageRecord, 'A page of usage records.') },
      },
    },
    async (request) => {
      const { limit, cursor, from, to } = request.query;
      return {
        status: 'success' as const,
        ...(await usage.list(requestTenant(request, options.clock), { limit: limit ?? 50, cursor, from, to })),
      };
    },
  );

  app.get(
    '/customers/:id/usage',
    {
      config: { scope: 'usage:read' },
      schema: {
        operationId: 'getCustomerUsage',
        tags: ['Usage'],
        summary: "One customer's usage in a window",
        description: "One customer's resource-hours in the window [`from`, `to`) of UTC days (default: the 7 days ending tonight).",
        params: CustomerParams,
        querystring: CustomerUsageQuery,
        response: { 200: success(UsageRecord, "The customer's usage record.") },
      },
    },
    async (request) => ok(await usage.forCustomer(requestTenant(request, options.clock), request.params.id, request.query)),
  );
};
