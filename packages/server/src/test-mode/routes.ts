import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { ok, success } from '../infra/http/envelope.ts';
import { CustomerParams, UserParams } from '../platform/names.ts';
import { User } from '../users/schemas.ts';
import {
  ClockAdvanceRequest,
  ClockResult,
  FailureRequest,
  FailureResult,
  RequiredActionsRequest,
  WorkloadsRequest,
  WorkloadsResult,
} from './schemas.ts';
import type { TestHelperService } from './service.ts';

/** CONTRACT §5, `/test-helpers`: test-mode tokens only; a live token is answered 404 before anything else. */
export const testHelperRoutes: FastifyPluginAsyncTypebox<{
  services: { testHelpers: TestHelperService; options: { clock: Clock } };
}> = async (app, { services }) => {
  const { testHelpers, options } = services;
  const tenant = (request: Parameters<typeof requestTenant>[0]) => requestTenant(request, options.clock);

  // Authentication answers a live token 404 before its scopes or these routes' bodies are looked at.
  app.addHook('onRoute', (route) => {
    route.config = { ...route.config, testModeOnly: true };
  });

  app.post(
    '/test-helpers/failures',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'testInjectFailure',
        tags: ['Test helpers'],
        summary: 'Make the next matching provisioning fail (test mode)',
        description:
          'Arms a failure: `customer.create` or `project.create` with a `code` fails the next matching provisioning (optionally only for `customer_id` or `project`, `count` times); `gpu_usage` makes the next `count` GPU usage checks fail, so quota and plan changes answer 503 GPU_USAGE_UNAVAILABLE.',
        body: FailureRequest,
        response: { 201: success(FailureResult, 'The failure, armed.') },
      },
    },
    async (request, reply) => reply.code(201).send(ok(await testHelpers.injectFailure(tenant(request), request.body))),
  );

  app.put(
    '/test-helpers/customers/:id/workloads',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'testSetWorkloads',
        tags: ['Test helpers'],
        summary: "Set a customer's live VMs, databases and GPUs (test mode)",
        description:
          "The customer's running VMs, databases and GPUs in the sandbox: they block deletion, limit GPU reductions, count in `workloads_running` and accrue usage.",
        params: CustomerParams,
        body: WorkloadsRequest,
        response: { 200: success(WorkloadsResult, "The customer's workloads.") },
      },
    },
    async (request) => ok(await testHelpers.setWorkloads(tenant(request), request.params.id, request.body)),
  );

  app.put(
    '/test-helpers/customers/:id/users/:username/required-actions',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'testSetRequiredActions',
        tags: ['Test helpers'],
        summary: "Set a user's pending identity-provider actions (test mode)",
        description:
          'Identity-provider actions the user has still to finish: console login answers 409 USER_ACTION_REQUIRED until they are cleared (`[]`).',
        params: UserParams,
        body: RequiredActionsRequest,
        response: { 200: success(User, 'The user, with its required actions.') },
      },
    },
    async (request) =>
      ok(await testHelpers.setRequiredActions(tenant(request), request.params.id, request.params.username, request.body.actions)),
  );

  app.post(
    '/test-helpers/clock/advance',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'testAdvanceClock',
        tags: ['Test helpers'],
        summary: "Move the partner's test clock forward (test mode)",
        description: "Moves the partner's test clock forward: grace periods, teardown, provisioning timeouts and usage follow it.",
        body: ClockAdvanceRequest,
        response: { 200: success(ClockResult, 'The test clock after the move.') },
      },
    },
    async (request) => ok(await testHelpers.advanceClock(tenant(request), request.body.seconds)),
  );

  app.post(
    '/test-helpers/clock/reset',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'testResetClock',
        tags: ['Test helpers'],
        summary: "Put the partner's test clock back on real time (test mode)",
        description:
          'Sets the offset to 0. Test data keeps the times it was recorded with; work due at a time still ahead (a provisioning step, a scheduled deletion) happens when the clock reaches that time again.',
        response: { 200: success(ClockResult, 'The test clock, back on real time.') },
      },
    },
    async (request) => ok(await testHelpers.resetClock(tenant(request))),
  );
};
