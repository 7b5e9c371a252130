import type { FastifyInstance } from 'fastify';
import { type QueryExecutorProvider, sql } from 'kysely';
import { Type } from 'typebox';
import { ApiError } from '../errors/catalogue.ts';

/**
 * `/healthz`: the process is alive. `/readyz`: it can serve, which means its database answers; `details`
 * reports what is degraded without making the process unready (the OS image catalogue).
 */
export async function healthRoutes(
  app: FastifyInstance,
  opts: { db: QueryExecutorProvider; details?: () => Record<string, unknown> },
): Promise<void> {
  const Ok = Type.Object({ status: Type.Literal('ok') });
  const Ready = Type.Object({ status: Type.Literal('ok'), details: Type.Optional(Type.Record(Type.String(), Type.Unknown())) });
  app.get('/healthz', { schema: { response: { 200: Ok } } }, async () => ({ status: 'ok' as const }));
  app.get('/readyz', { schema: { response: { 200: Ready } } }, async () => {
    try {
      await sql`select 1`.execute(opts.db);
    } catch {
      throw new ApiError('UNAVAILABLE', 'The database does not answer.', { retryAfter: 5 });
    }
    return opts.details ? { status: 'ok' as const, details: opts.details() } : { status: 'ok' as const };
  });
}
