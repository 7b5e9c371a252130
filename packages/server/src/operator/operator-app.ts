import type { Logger } from 'pino';
import { healthRoutes } from '../app/health.ts';
import type { Services } from '../app/services.ts';
import { capacityOperatorRoutes } from '../capacity/operator-routes.ts';
import { customerOperatorRoutes } from '../customers/operator-routes.ts';
import { createHttpApp } from '../infra/http/create-http-app.ts';
import { operatorAuthPlugin } from '../infra/http/operator-auth.ts';
import { operationOperatorRoutes } from '../operations/operator-routes.ts';
import { operatorRoutes } from './routes.ts';

export const OPERATOR_API_PREFIX = '/api/operator/v1';

/** The operator API: its own listener, its own token, never served with the partner API. */
export async function buildOperatorApp(services: Services, logger: Logger, operatorToken: string) {
  const app = createHttpApp(logger, 'operator-api');
  await app.register(healthRoutes, { db: services.options.database.db, details: () => ({ os_images: services.images.state() }) });
  await app.register(
    async (api) => {
      await api.register(operatorAuthPlugin, { token: operatorToken });
      await api.register(operatorRoutes, { services });
      await api.register(capacityOperatorRoutes, { services });
      await api.register(customerOperatorRoutes, { services });
      await api.register(operationOperatorRoutes, { services });
    },
    { prefix: OPERATOR_API_PREFIX },
  );
  return app;
}
