import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ok, success } from '../infra/http/envelope.ts';
import { operatorOf } from '../infra/http/operator-auth.ts';
import { PartnerId } from '../partners/schemas.ts';
import type { PartnerService } from '../partners/service.ts';
import { PlanId } from '../platform/names.ts';
import { PartnerCapacity, Plan, SetCapacityRequest, SetGpuProfilesRequest, SetPartnerPlansRequest, SetPlanRequest } from './schemas.ts';
import type { CapacityService } from './service.ts';

const PartnerParams = Type.Object({ id: PartnerId }, { additionalProperties: false });
const PlanParams = Type.Object({ id: PlanId }, { additionalProperties: false });

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  capacity: CapacityService;
  partners: PartnerService;
}

/** CONTRACT §3: the plan catalogue, partners' plans, capacity pools and GPU profiles (audited). */
export const capacityOperatorRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { capacity, partners } = services;

  app.get('/plans', { schema: { response: { 200: success(Type.Array(Plan)) } } }, async () => ok(await capacity.listPlans()));

  app.put('/plans/:id', { schema: { params: PlanParams, body: SetPlanRequest, response: { 200: success(Plan) } } }, async (request) =>
    ok(await capacity.setPlan(request.params.id, request.body, operatorOf(request))),
  );

  app.get('/partners/:id/capacity', { schema: { params: PartnerParams, response: { 200: success(PartnerCapacity) } } }, async (request) =>
    ok(await capacity.partnerCapacity(request.params.id)),
  );

  app.put(
    '/partners/:id/capacity',
    { schema: { params: PartnerParams, body: SetCapacityRequest, response: { 200: success(PartnerCapacity) } } },
    async (request) => {
      // A partner managed by a Kubernetes Partner resource takes its capacity from there (409 otherwise).
      await partners.assertUnmanaged(request.params.id, ['capacity']);
      return ok(await capacity.setCapacity(request.params.id, request.body as SetCapacityRequest, operatorOf(request)));
    },
  );

  app.put(
    '/partners/:id/plans',
    { schema: { params: PartnerParams, body: SetPartnerPlansRequest, response: { 200: success(PartnerCapacity) } } },
    async (request) => {
      await partners.assertUnmanaged(request.params.id, ['plans']);
      return ok(await capacity.setPartnerPlans(request.params.id, request.body.plans, operatorOf(request)));
    },
  );

  app.put(
    '/partners/:id/gpu-profiles',
    { schema: { params: PartnerParams, body: SetGpuProfilesRequest, response: { 200: success(PartnerCapacity) } } },
    async (request) => {
      await partners.assertUnmanaged(request.params.id, ['gpu_profiles']);
      return ok(await capacity.setGpuProfiles(request.params.id, request.body.profiles, operatorOf(request)));
    },
  );
};
