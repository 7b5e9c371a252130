import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { listOf, ok, success } from '../infra/http/envelope.ts';
import { emptyBodyIsObject } from '../infra/http/validation.ts';
import { CustomerParams } from '../platform/names.ts';
import {
  CreateCustomerRequest,
  CreateCustomerResponse,
  Customer,
  CustomerWithProjects,
  DeleteCustomerQuery,
  DeleteCustomerResult,
  ListCustomersQuery,
  ResumeRequest,
  ResumeResult,
  SuspendRequest,
  SuspendResult,
} from './schemas.ts';
import type { CustomerService } from './service.ts';

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  customers: CustomerService;
  options: { clock: Clock };
}

/** CONTRACT §4, Customers. Thin: validation by schema, the rules in CustomerService. */
export const customerRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { customers, options } = services;
  const tenant = (request: Parameters<typeof requestTenant>[0]) => requestTenant(request, options.clock);

  app.post(
    '/customers',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'createCustomer',
        summary: 'Create a customer: its organization, owner admin and first project (asynchronous)',
        body: CreateCustomerRequest,
        response: { 202: success(CreateCustomerResponse) },
      },
    },
    async (request, reply) => reply.code(202).send(ok(await customers.create(tenant(request), request.body))),
  );

  app.get(
    '/customers',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'listCustomers',
        summary: 'List customers by id',
        querystring: ListCustomersQuery,
        response: { 200: listOf(Customer) },
      },
    },
    async (request) => {
      const { external_id, status, limit, cursor } = request.query;
      return {
        status: 'success' as const,
        ...(await customers.list(tenant(request), { external_id, status }, { limit: limit ?? 50, cursor })),
      };
    },
  );

  app.get(
    '/customers/:id',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'getCustomer',
        summary: 'Read a customer with its projects',
        params: CustomerParams,
        response: { 200: success(CustomerWithProjects) },
      },
    },
    async (request) => ok(await customers.get(tenant(request), request.params.id)),
  );

  app.post(
    '/customers/:id/suspend',
    {
      config: { scope: 'customers:write' },
      preValidation: emptyBodyIsObject,
      schema: {
        operationId: 'suspendCustomer',
        summary: 'Suspend a customer and stop its workloads',
        params: CustomerParams,
        body: SuspendRequest,
        response: { 200: success(SuspendResult) },
      },
    },
    async (request) => ok(await customers.suspend(tenant(request), request.params.id, request.body.reason)),
  );

  app.post(
    '/customers/:id/resume',
    {
      config: { scope: 'customers:write' },
      preValidation: emptyBodyIsObject,
      schema: {
        operationId: 'resumeCustomer',
        summary: 'Resume a suspended customer, or cancel its scheduled deletion',
        params: CustomerParams,
        body: ResumeRequest,
        response: { 200: success(ResumeResult) },
      },
    },
    async (request) => ok(await customers.resume(tenant(request), request.params.id)),
  );

  app.delete(
    '/customers/:id',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'deleteCustomer',
        summary: 'Delete a customer: scheduled and recoverable (default), or immediate',
        params: CustomerParams,
        querystring: DeleteCustomerQuery,
        response: { 202: success(DeleteCustomerResult) },
      },
    },
    async (request, reply) => {
      const { mode, grace_days } = request.query;
      return reply
        .code(202)
        .send(ok(await customers.delete(tenant(request), request.params.id, { mode: mode ?? 'scheduled', grace_days })));
    },
  );
};
