import cookie from '@fastify/cookie';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { OsImageCatalogue } from '../images/catalogue.ts';
import type { OsImage } from '../images/fields.ts';
import { OsImageSchema, OsImagesParams } from '../images/schemas.ts';
import { ApiError, notFound } from '../infra/errors/catalogue.ts';
import { CONSOLE_COOKIE } from './service.ts';
import type { ConsoleSessionCache } from './session-cache.ts';

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  consoleSessions: ConsoleSessionCache;
  images: OsImageCatalogue;
}

/**
 * `GET /api/create-vm/{namespace}/os-images` (platform-deployment.md, CONTRACT §7): the catalogue as a
 * bare JSON array, for a console session of a user of the customer that owns the namespace. No session:
 * 401; a namespace the customer does not have (another customer's included): 404, so the answer never
 * tells whether a namespace exists elsewhere. The body is the catalogue serialised once per load.
 */
export const imageRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  await app.register(cookie);
  app.get(
    '/api/create-vm/:namespace/os-images',
    { schema: { hide: true, params: OsImagesParams, response: { 200: Type.Array(OsImageSchema) } } },
    async (request, reply) => {
      const session = await services.consoleSessions.session(request.cookies[CONSOLE_COOKIE]);
      if (!session) throw new ApiError('UNAUTHORIZED', 'This list needs a console session: open a console login link first.');
      const { namespace } = request.params;
      if (!session.projects.some((project) => project.namespace === namespace)) throw notFound(`Namespace ${namespace.slice(0, 63)}`);
      // Already the JSON of validated entries holding only the seed's fields: sent as is, not serialised again.
      const body: unknown = services.images.json();
      reply.type('application/json; charset=utf-8').header('cache-control', 'private, no-store');
      return body as OsImage[];
    },
  );
};
