import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { listOf, ok, success } from '../infra/http/envelope.ts';
import { PageQuery } from '../infra/pagination/cursor.ts';
import { DeleteWebhookResult, DeliveryRecord, PutWebhookRequest, SecretRotation, TestDeliveryResult, WebhookConfig } from './schemas.ts';
import type { WebhookService } from './service.ts';

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  options: { clock: Clock };
  webhooks: WebhookService;
}

/** partner-api.md, Endpoints: the webhook receiver, its secret, its test ping and its delivery log. */
export const webhookRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { webhooks, options } = services;
  const tenant = (request: Parameters<typeof requestTenant>[0]) => requestTenant(request, options.clock);
  // A secret in a response must not be kept by any cache on the way.
  const noStore = { 'cache-control': 'no-store' };

  app.put(
    '/webhook',
    {
      config: { scope: 'customers:write', idempotentReplay: webhooks.replay },
      schema: {
        operationId: 'putWebhook',
        summary: 'Configure the webhook receiver (the PUT that creates it returns the signing secret, once)',
        body: PutWebhookRequest,
        response: { 200: success(WebhookConfig) },
      },
    },
    async (request, reply) => reply.headers(noStore).send(ok(await webhooks.put(tenant(request), request.body))),
  );

  app.get(
    '/webhook',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'getWebhook',
        summary: 'Read the webhook configuration (never the secret)',
        response: { 200: success(WebhookConfig) },
      },
    },
    async (request) => ok(await webhooks.get(tenant(request))),
  );

  app.delete(
    '/webhook',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'deleteWebhook',
        summary: 'Remove the webhook configuration and its secret; delivery stops',
        response: { 200: success(DeleteWebhookResult) },
      },
    },
    async (request) => ok(await webhooks.delete(tenant(request))),
  );

  app.post(
    '/webhook/secret',
    {
      config: { scope: 'customers:write', idempotentReplay: webhooks.rotationReplay },
      schema: {
        operationId: 'rotateWebhookSecret',
        summary: 'Replace the signing secret; new deliveries use the new one at once',
        response: { 200: success(SecretRotation) },
      },
    },
    async (request, reply) => reply.headers(noStore).send(ok(await webhooks.rotateSecret(tenant(request)))),
  );

  app.post(
    '/webhook/test',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'testWebhook',
        summary: 'Send one ping now: a single attempt with a 5-second timeout',
        response: { 200: success(TestDeliveryResult) },
      },
    },
    async (request) => ok(await webhooks.test(tenant(request))),
  );

  app.get(
    '/webhook/deliveries',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'listWebhookDeliveries',
        summary: 'The 50 most recent delivery attempts, newest first',
        querystring: Type.Object(PageQuery, { additionalProperties: false }),
        response: { 200: listOf(DeliveryRecord) },
      },
    },
    async (request) => ({
      status: 'success' as const,
      ...(await webhooks.listDeliveries(tenant(request), { limit: request.query.limit ?? 50, cursor: request.query.cursor })),
    }),
  );
};
