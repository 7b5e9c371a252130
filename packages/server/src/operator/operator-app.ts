import type { Logger } from 'pino';
import type { AuditTables } from '../audit/tables.ts';
import type { KeyService } from '../auth/keys-service.ts';
import { capacityOperatorRoutes } from '../capacity/operator-routes.ts';
import type { CapacityService } from '../capacity/service.ts';
import { customerOperatorRoutes } from '../customers/operator-routes.ts';
import type { CustomerService } from '../customers/service.ts';
import type { OsImageCatalogue } from '../images/catalogue.ts';
import type { Db } from '../infra/db/handle.ts';
import { createHttpApp } from '../infra/http/create-http-app.ts';
import { healthRoutes } from '../infra/http/health.ts';
import { operatorAuthPlugin } from '../infra/http/operator-auth.ts';
import type { ServerMetrics } from '../infra/metrics/metrics.ts';
import { metricsRoutes } from '../infra/metrics/routes.ts';
import type { CursorCodec } from '../infra/pagination/cursor.ts';
import { operationOperatorRoutes } from '../operations/operator-routes.ts';
import type { OperationService } from '../operations/service.ts';
import type { PartnerService } from '../partners/service.ts';
import { operatorRoutes } from './routes.ts';

export const OPERATOR_API_PREFIX = '/api/operator/v1';

/** What the operator API uses of the services the composition root wires. */
interface OperatorServices {
  partners: PartnerService;
  keys: KeyService;
  cursors: CursorCodec;
  capacity: CapacityService;
  customers: CustomerService;
  operations: OperationService;
  images: Pick<OsImageCatalogue, 'state'>;
  options: { database: { db: Db<AuditTables> } };
  metrics: ServerMetrics;
}

/**
 * The operator API: its own listener, its own token, never served with the partner API. Beside it, at the
 * root, the health checks and `/metrics` (with its own token, `metricsScrapeToken`, when one is set).
 */
export async function buildOperatorApp(services: OperatorServices, logger: Logger, operatorToken: string, metricsScrapeToken?: string) {
  const app = createHttpApp(logger, 'operator-api', { metrics: services.metrics });
  await app.register(healthRoutes, { db: services.options.database.db, details: () => ({ os_images: services.images.state() }) });
  await app.register(metricsRoutes, { metrics: services.metrics, token: metricsScrapeToken });
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
