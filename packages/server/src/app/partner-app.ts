import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import { authenticatePlugin } from '../auth/authenticate.ts';
import { authRoutes } from '../auth/routes.ts';
import { capacityRoutes } from '../capacity/routes.ts';
import { consoleRoutes } from '../console/routes.ts';
import { customerRoutes } from '../customers/routes.ts';
import { eventRoutes } from '../events/routes.ts';
import { createHttpApp } from '../infra/http/create-http-app.ts';
import { idempotencyPlugin } from '../infra/idempotency/plugin.ts';
import { operationRoutes } from '../operations/routes.ts';
import { projectRoutes } from '../projects/routes.ts';
import { testHelperRoutes } from '../test-mode/routes.ts';
import { usageRoutes } from '../usage/routes.ts';
import { userRoutes } from '../users/routes.ts';
import { webhookRoutes } from '../webhooks/routes.ts';
import { healthRoutes } from './health.ts';
import type { Services } from './services.ts';

export const PARTNER_API_PREFIX = '/api/public/v1';

/**
 * The partner API's composition root. Order: infrastructure first (request
 * ids, errors, validation come from createHttpApp), then the cross-cutting
 * plugins every partner route inherits (authentication and rate limits, then
 * idempotency, which needs the principal), then the modules' routes.
 */
export async function buildPartnerApp(services: Services, logger: Logger, extraRoutes: FastifyPluginAsync<{ services: Services }>[] = []) {
  const { database, clock, trustProxy } = services.options;
  const app = createHttpApp(logger, 'partner-api', { trustProxy });

  await app.register(healthRoutes, { db: database.db });
  await app.register(consoleRoutes, { services });
  await app.register(
    async (api) => {
      await api.register(authenticatePlugin, { auth: services.auth });
      await api.register(idempotencyPlugin, { db: database.db, clock });
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
      for (const routes of extraRoutes) await api.register(routes, { services });
    },
    { prefix: PARTNER_API_PREFIX },
  );
  return app;
}
