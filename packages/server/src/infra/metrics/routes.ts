import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors/catalogue.ts';
import type { ServerMetrics } from './metrics.ts';

/**
 * `GET /metrics`, on the operator listener: this process's metrics in Prometheus' text format. With a
 * scrape token (TENANTRY_METRICS_SCRAPE_TOKEN) it answers only a request bearing it, compared in
 * constant time; without one it answers as the health checks do. Never the operator token: whoever
 * holds that administers partners and keys, and a metrics scraper needs to read numbers only.
 */
export async function metricsRoutes(app: FastifyInstance, opts: { metrics: Pick<ServerMetrics, 'scrape'>; token: string | undefined }) {
  const expected = opts.token === undefined ? undefined : digest(opts.token);
  app.get('/metrics', async (request, reply) => {
    if (expected) {
      const header = request.headers.authorization ?? '';
      const presented = header.toLowerCase().startsWith('bearer ') ? header.slice(7).trim() : '';
      if (!presented || !timingSafeEqual(digest(presented), expected)) {
        throw new ApiError('UNAUTHORIZED', 'Send the metrics scrape token as "Authorization: Bearer <token>".');
      }
    }
    const { text, contentType } = await opts.metrics.scrape();
    return reply.type(contentType).send(text);
  });
}

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
