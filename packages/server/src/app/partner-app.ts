import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import { authenticatePlugin } from '../auth/authenticate.ts';
import { authRoutes } from '../auth/routes.ts';
import { capacityRoutes } from '../capacity/routes.ts';
import { imageRoutes } from '../console/image-routes.ts';
import { consoleRoutes } from '../console/routes.ts';
import { customerRoutes } from '../customers/routes.ts';
import { docsRoutes } from '../docs/routes.ts';
import { eventRoutes } from '../events/routes.ts';
import { createHttpApp } from '../infra/http/create-http-app.ts';
import { healthRoutes } from '../infra/http/health.ts';
import { idempotencyPlugin } from '../infra/idempotency/plugin.ts';
import { registerOpenApi } from '../openapi/document.ts';
import { operationRoutes } from '../operations/routes.ts';
import { projectRoutes } from '../projects/routes.ts';
import { testHelperRoutes } from '../test-mode/routes.ts';
import { usageRoutes } from '../usage/routes.ts';
import { userRoutes } from '../users/routes.ts';
import { webhookRoutes } from '../webhooks/routes.ts';
import type { Services } from './services.ts';

export const PARTNER_API_PREFIX = '/api/public/v1';
/** One route of the partner API as registered: what the OpenAPI document must describe. */
export interface PartnerRoute {
  method: string;
  url: string;
  scope: string | undefined;
}

/** The contract's version, as the OpenAPI document's `info.version`. */
export const API_VERSION = '1.0.0';

/**
 * The partner API's composition root. Order: infrastructure first (request
 * ids, errors, validation come from createHttpApp), then the cross-cutting
 * plugins every partner route inherits (authentication and rate limits, then
 * idempotency, which needs the principal), then the modules' routes.
 */
export async function buildPartnerApp(services: Services, logger: Logger, extraRoutes: FastifyPluginAsync<{ services: Services }>[] = []) {
  const { database, clock, trustProxy } = services.options;
  const app = createHttpApp(logger, 'partner-api', { trustProxy, metrics: services.metrics });
  // Before any route: the document is built from the routes as they are added.
  await registerOpenApi(app, { version: API_VERSION });
  const partnerRoutes: PartnerRoute[] = [];
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(`${PARTNER_API_PREFIX}/`) || route.url.endsWith('/openapi.json')) return;
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      partnerRoutes.push({ method, url: route.url, scope: (route.config as { scope?: string } | undefined)?.scope });
    }
  });

  await app.register(healthRoutes, { db: database.db, details: () => ({ os_images: services.images.state() }) });
  // The API reference (/docs) and a landing page (/), for people with a browser.
  await app.register(docsRoutes, { documentUrl: `${PARTNER_API_PREFIX}/openapi.json` });
  await app.register(consoleRoutes, { services });
  await app.register(imageRoutes, { services });
  await app.register(
    async (api) => {
      await api.register(authenticatePlugin, { auth: services.auth });
      await api.register(idempotencyPlugin, { db: database.db, clock, exclusive: database.embedded });
      await api.register(authRoutes, { auth: services.auth });
      await api.register(customerRoutes, { services });
      await api.register(projectRoutes, { services });
      await api.register(userRoutes, { services });
      await api.register(operationRoutes, { services });
      await api.register(capacityRoutes, { services });
      await api.register(usageRoutes, { services });
      await api.register(webhookRoutes, { services });
      await api.register(eventRoutes, { services });
      await api.register(testHelperRoutes, { services });
      // Public, like the token endpoint: partners and CI fetch the contract without a key.
      api.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
      for (const routes of extraRoutes) await api.register(routes, { services });
    },
    { prefix: PARTNER_API_PREFIX },
  );
  return Object.assign(app, { partnerRoutes });
}
