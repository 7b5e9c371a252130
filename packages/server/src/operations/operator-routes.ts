import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ok, success } from '../infra/http/envelope.ts';
import type { OperationService } from './service.ts';

const StuckQuery = Type.Object(
  {
    min_failed_looks: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 5 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  },
  { additionalProperties: false },
);
const StuckOperation = Type.Object({
  id: Type.String(),
  partner_id: Type.String(),
  mode: Type.String(),
  type: Type.String(),
  status: Type.String(),
  customer_id: Type.String(),
  project: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  due_at: Type.String({ format: 'date-time' }),
  failed_looks: Type.Integer(),
  last_problem: Type.Union([Type.String(), Type.Null()]),
});

/**
 * Operations whose looks keep failing: the platform does not answer, refuses a teardown step, or a
 * step throws. They are retried with backoff for ever (a teardown cannot fail); this is where an
 * operator sees them (`tenantry operations stuck`).
 */
export const operationOperatorRoutes: FastifyPluginAsyncTypebox<{ services: { operations: OperationService } }> = async (
  app,
  { services },
) => {
  const { operations } = services;
  app.get(
    '/operations/stuck',
    { schema: { querystring: StuckQuery, response: { 200: success(Type.Array(StuckOperation)) } } },
    async (request) => {
      const rows = await operations.stuck(request.query.min_failed_looks ?? 5, request.query.limit ?? 50);
      return ok(
        rows.map((row) => ({
          id: row.id,
          partner_id: row.partner_id,
          mode: row.mode,
          type: row.type,
          status: row.status,
          customer_id: row.customer_id,
          project: row.project,
          created_at: row.created_at.toISOString(),
          due_at: row.due_at.toISOString(),
          failed_looks: row.failed_looks,
          last_problem: row.last_problem,
        })),
      );
    },
  );
};
