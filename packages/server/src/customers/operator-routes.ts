import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ok, success } from '../infra/http/envelope.ts';
import { operatorOf } from '../infra/http/operator-auth.ts';
import { PartnerId } from '../partners/schemas.ts';
import { CustomerId } from '../platform/names.ts';
import type { CustomerService } from './service.ts';

const HoldParams = Type.Object({ id: PartnerId, customer: CustomerId }, { additionalProperties: false });
const ModeQuery = Type.Object(
  { mode: Type.Optional(Type.Union([Type.Literal('live'), Type.Literal('test')], { default: 'live' })) },
  { additionalProperties: false },
);
const HoldRequest = Type.Object({ reason: Type.String({ minLength: 1, maxLength: 500 }) }, { additionalProperties: false });
const Hold = Type.Object({
  customer_id: Type.String(),
  held: Type.Boolean(),
  held_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  reason: Type.Union([Type.String(), Type.Null()]),
});

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  customers: CustomerService;
}

/** The operator's hold on a customer (partner-api.md, States rule 7): while set, the partner's resume answers CONFLICT. Audited. */
export const customerOperatorRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { customers } = services;
  const target = (params: { id: string; customer: string }, mode: 'live' | 'test' | undefined) => ({
    partnerId: params.id,
    mode: mode ?? ('live' as const),
    customerId: params.customer,
  });

  app.put(
    '/partners/:id/customers/:customer/hold',
    { schema: { params: HoldParams, querystring: ModeQuery, body: HoldRequest, response: { 200: success(Hold) } } },
    async (request) => ok(await customers.setHold(target(request.params, request.query.mode), request.body.reason, operatorOf(request))),
  );

  app.delete(
    '/partners/:id/customers/:customer/hold',
    { schema: { params: HoldParams, querystring: ModeQuery, response: { 200: success(Hold) } } },
    async (request) => ok(await customers.setHold(target(request.params, request.query.mode), null, operatorOf(request))),
  );
};
