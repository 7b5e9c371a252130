import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { listOf, ok, success } from '../infra/http/envelope.ts';
import { CustomerParams } from '../platform/names.ts';
import type { QuotaService } from './quotas.ts';
import { Capacity, CatalogQuery, CustomerPlan, Plan, PutPlanRequest, PutQuotaRequest, Quota } from './schemas.ts';
import type { CapacityService } from './service.ts';

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  capacity: CapacityService;
  options: { clock: Clock };
  quotas: QuotaService;
}

/** partner-api.md, Endpoints, and CONTRACT §4, Quota, plan; Capacity. */
export const capacityRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { capacity, quotas, options } = services;
  const tenant = (request: Parameters<typeof requestTenant>[0]) => requestTenant(request, options.clock);

  app.get(
    '/catalog/plans',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'listPlans',
        summary: 'The plans this partner may assign, by id',
        querystring: CatalogQuery,
        response: { 200: listOf(Plan) },
      },
    },
    async (request) => ({
      status: 'success' as const,
      ...(await capacity.catalog(tenant(request), { limit: request.query.limit ?? 50, cursor: request.query.cursor })),
    }),
  );

  app.get(
    '/capacity',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'getCapacity',
        summary: 'The capacity pool, the per-customer maximum and the grantable GPU profiles',
        response: { 200: success(Capacity) },
      },
    },
    async (request) => ok(await capacity.capacity(tenant(request))),
  );

  app.get(
    '/customers/:id/quota',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'getQuota',
        summary: "Read a customer's quota and project caps",
        params: CustomerParams,
        response: { 200: success(Quota) },
      },
    },
    async (request) => ok(await quotas.get(tenant(request), request.params.id)),
  );

  app.put(
    '/customers/:id/quota',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'putQuota',
        summary: "Change a customer's quota and project caps (send the revision you read)",
        params: CustomerParams,
        body: PutQuotaRequest,
        response: { 200: success(Quota) },
      },
    },
    async (request) => ok(await quotas.put(tenant(request), request.params.id, request.body)),
  );

  app.get(
    '/customers/:id/plan',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'getCustomerPlan',
        summary: "Read a customer's plan",
        params: CustomerParams,
        response: { 200: success(CustomerPlan) },
      },
    },
    async (request) => ok(await quotas.getPlan(tenant(request), request.params.id)),
  );

  app.put(
    '/customers/:id/plan',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'putCustomerPlan',
        summary: "Set a customer's plan; its quota becomes the plan's",
        params: CustomerParams,
        body: PutPlanRequest,
        response: { 200: success(CustomerPlan) },
      },
    },
    async (request) => ok(await quotas.putPlan(tenant(request), request.params.id, request.body.plan_id)),
  );
};
