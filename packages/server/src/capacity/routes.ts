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
        tags: ['Capacity'],
        summary: 'The plans this partner may assign, by id',
        description: 'The plans the partner may assign (at creation and with `PUT /customers/{id}/plan`), by id, each with its quota.',
        querystring: CatalogQuery,
        response: { 200: listOf(Plan, 'A page of plans.') },
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
        tags: ['Capacity'],
        summary: 'The capacity pool, the per-customer maximum and the grantable GPU profiles',
        description:
          "The partner's capacity pool (total, allocated and available for each dimension and GPU profile), the most one customer may hold, and the GPU profiles the partner may grant. Test customers have an allocation of their own and never take live capacity.",
        response: { 200: success(Capacity, 'The capacity.') },
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
        tags: ['Capacity'],
        summary: "Read a customer's quota and project caps",
        description: "The customer's quota and per-project caps, with the revision to send back when changing them.",
        params: CustomerParams,
        response: { 200: success(Quota, 'The quota.') },
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
        tags: ['Capacity'],
        summary: "Change a customer's quota and project caps (send the revision you read)",
        description:
          'Replaces the quota (an omitted GPU profile is 0) and, when given, the project caps (omitted: kept). Send the `revision` you read; another answers 409 CONFLICT. The change is taken from, or returned to, the capacity pool; `customer.quota_changed` follows.',
        params: CustomerParams,
        body: PutQuotaRequest,
        response: { 200: success(Quota, 'The quota, at its next revision.') },
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
        tags: ['Capacity'],
        summary: "Read a customer's plan",
        description: "The customer's plan, with the plan's quota.",
        params: CustomerParams,
        response: { 200: success(CustomerPlan, "The customer's plan.") },
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
        tags: ['Capacity'],
        summary: "Set a customer's plan; its quota becomes the plan's",
        description:
          "Sets the plan and replaces the quota with the plan's, at the next revision (no revision is sent). `customer.plan_changed` follows.",
        params: CustomerParams,
        body: PutPlanRequest,
        response: { 200: success(CustomerPlan, "The customer's plan, now set.") },
      },
    },
    async (request) => ok(await quotas.putPlan(tenant(request), request.params.id, request.body.plan_id)),
  );
};
