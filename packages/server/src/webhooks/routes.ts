import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { listOf, ok, success } from '../infra/http/envelope.ts';
import { PageQuery } from '../infra/pagination/cursor.ts';
import { explainFilterEntries } from './event-filter.ts';
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
      config: { scope: 'customers:write', idempotentReplay: webhooks.replay, explainValidation: explainFilterEntries },
      schema: {
        operationId: 'putWebhook',
        tags: ['Webhooks'],
        summary: 'Configure the webhook receiver (the PUT that creates it returns the signing secret, once)',
        description:
          'Replaces the whole configuration: omitted `events` is `["*"]`, omitted `enabled` is `true`. The URL must be HTTPS on a public address, without credentials (a private one only if the operator allows it). The PUT that creates the secret returns `signing_secret`, once (and its idempotent replays, for 24 hours); later PUTs answer `signing_secret_configured: true`.',
        body: PutWebhookRequest,
        response: { 200: success(WebhookConfig, 'The webhook configuration.') },
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
        tags: ['Webhooks'],
        summary: 'Read the webhook configuration (never the secret)',
        description: 'The webhook configuration, never the secret; 404 NOT_FOUND when none is configured.',
        response: { 200: success(WebhookConfig, 'The webhook configuration.') },
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
        tags: ['Webhooks'],
        summary: 'Remove the webhook configuration and its secret; delivery stops',
        description: 'Removes the configuration and its secret: delivery stops.',
        response: { 200: success(DeleteWebhookResult, 'The webhook, removed.') },
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
        tags: ['Webhooks'],
        summary: 'Replace the signing secret; new deliveries use the new one at once',
        description:
          'A new signing secret, returned once. Deliveries are signed with it from now on; retries of earlier ones keep their signature, so accept the previous secret until `previous_secret_valid_until`.',
        response: { 200: success(SecretRotation, 'The new signing secret.') },
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
        tags: ['Webhooks'],
        summary: 'Send one ping now: a single attempt with a 5-second timeout',
        description:
          'Sends one `ping` now: a single attempt with a 5-second timeout and no retry. It ignores the `events` filter and works while delivery is disabled; without a URL and secret it answers 400 NOT_CONFIGURED.',
        response: { 200: success(TestDeliveryResult, 'What the receiver answered.') },
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
        tags: ['Webhooks'],
        summary: 'The 50 most recent delivery attempts, newest first',
        description:
          'One record per delivery attempt, test pings included, newest first; only the 50 most recent are kept. A debugging log, not a replay queue.',
        querystring: Type.Object(PageQuery, { additionalProperties: false }),
        response: { 200: listOf(DeliveryRecord, 'A page of delivery attempts.') },
      },
    },
    async (request) => ({
      status: 'success' as const,
      ...(await webhooks.listDeliveries(tenant(request), { limit: request.query.limit ?? 50, cursor: request.query.cursor })),
    }),
  );
};
