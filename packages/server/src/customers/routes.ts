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
        tags: ['Customers'],
        summary: 'Create a customer: its organization, owner admin and first project (asynchronous)',
        description:
          "Starts a `customer.create` operation and answers 202 with the customer (`provisioning`) and the operation, which makes the organization, the owner admin user and the first project (`project`, by default `default`); `customer.ready` or `customer.failed` follows. Ids are unique per partner and mode (409 ALREADY_EXISTS). `plan_id` defaults to the partner's default plan, whose quota is taken from the capacity pool (409 PARTNER_CAPACITY_EXCEEDED when it does not fit).",
        body: CreateCustomerRequest,
        response: { 202: success(CreateCustomerResponse, 'Accepted: the customer, provisioning, and the operation that provisions it.') },
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
        tags: ['Customers'],
        summary: 'List customers by id',
        description:
          "The customers of the token's mode, by id, without their projects. Filter by `external_id` or `status`; page with `limit` and `cursor`.",
        querystring: ListCustomersQuery,
        response: { 200: listOf(Customer, 'A page of customers.') },
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
        tags: ['Customers'],
        summary: 'Read a customer with its projects',
        description: 'The customer with its projects. A deleted customer is gone: 404 NOT_FOUND.',
        params: CustomerParams,
        response: { 200: success(CustomerWithProjects, 'The customer, with its projects.') },
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
        tags: ['Customers'],
        summary: 'Suspend a customer and stop its workloads',
        description:
          "Stops the customer's workloads and marks it `suspended`; `customer.suspended` follows. The body is optional; its `reason` is kept as `suspension_reason`. Suspending a suspended customer answers 200 with its current state and records no event.",
        params: CustomerParams,
        body: SuspendRequest,
        response: { 200: success(SuspendResult, 'The customer, suspended.') },
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
        tags: ['Customers'],
        summary: 'Resume a suspended customer, or cancel its scheduled deletion',
        description:
          'Brings a suspended customer back to `active`, or cancels a scheduled deletion; `customer.resumed` follows, with `cancelled_scheduled_deletion`. Send no body, or `{}`. A failed customer, or one the operator holds, answers 409 CONFLICT; resuming an active customer answers 200 and records no event.',
        params: CustomerParams,
        body: ResumeRequest,
        response: { 200: success(ResumeResult, 'The customer, active.') },
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
        tags: ['Customers'],
        summary: 'Delete a customer: scheduled and recoverable (default), or immediate',
        description:
          "`mode=scheduled` (the default) marks the customer `deletion_scheduled` for `grace_days` (default: the partner's, `defaults.grace_days` in whoami), recoverable with resume; `mode=immediate` starts the teardown at once and cannot be undone, and takes no `grace_days` (400). Running VMs or databases block both (409 CONFLICT, listed in `details`). Asking again answers 202 with the current state; `immediate` escalates a scheduled deletion. `customer.deleted` follows the teardown.",
        params: CustomerParams,
        querystring: DeleteCustomerQuery,
        response: { 202: success(DeleteCustomerResult, "Accepted: the deletion's state.") },
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
