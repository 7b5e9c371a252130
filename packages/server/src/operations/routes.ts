import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { listOf, ok, success } from '../infra/http/envelope.ts';
import { PageQuery } from '../infra/pagination/cursor.ts';
import { CustomerId, CustomerParams } from '../platform/names.ts';
import { Operation } from './schemas.ts';
import type { OperationService } from './service.ts';

const OperationParams = Type.Object(
  { id: CustomerId, operation_id: Type.String({ pattern: '^op_[0-9a-z]{26}$' }) },
  { additionalProperties: false },
);

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  operations: OperationService;
  options: { clock: Clock };
}

/** partner-api.md, Operation; CONTRACT §4, Operations. */
export const operationRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { operations, options } = services;
  const tenant = (request: Parameters<typeof requestTenant>[0]) => requestTenant(request, options.clock);

  app.get(
    '/customers/:id/operations',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'listOperations',
        tags: ['Operations'],
        summary: "List a customer's operations of the last 7 days, newest first",
        description:
          "The customer's operations of the last 7 days, newest first: the creations and deletions of the customer and its projects. Reading a page also moves provisioning on.",
        params: CustomerParams,
        querystring: Type.Object(PageQuery, { additionalProperties: false }),
        response: { 200: listOf(Operation, 'A page of operations.') },
      },
    },
    async (request) => ({
      status: 'success' as const,
      ...(await operations.list(tenant(request), request.params.id, { limit: request.query.limit ?? 50, cursor: request.query.cursor })),
    }),
  );

  app.get(
    '/customers/:id/operations/:operation_id',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'getOperation',
        tags: ['Operations'],
        summary: 'Read one operation',
        description:
          "One operation: `pending`, `running`, then `succeeded` or `failed` (with `error.code` and `error.message`). A deleted customer's operations stay readable by id for 7 days.",
        params: OperationParams,
        response: { 200: success(Operation, 'The operation.') },
      },
    },
    async (request) => ok(await operations.get(tenant(request), request.params.id, request.params.operation_id)),
  );
};
