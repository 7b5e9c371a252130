import cookie from '@fastify/cookie';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Services } from '../app/services.ts';
import { consoleErrorPage } from './page.ts';
import { CONSOLE_COOKIE } from './service.ts';
import { ConsoleQuery, consoleVmRoutes, renderConsole, sendPage } from './vm-routes.ts';

/**
 * The console (CONTRACT §7), served beside the partner API on the same
 * listener: a login link opens a session and lands on `/console`.
 */
export const consoleRoutes: FastifyPluginAsyncTypebox<{ services: Services }> = async (app, { services }) => {
  const { console: consoleService, options } = services;
  const secure = () => options.publicUrl().startsWith('https://');
  await app.register(cookie);

  app.get(
    '/console/login/:token',
    { schema: { params: Type.Object({ token: Type.String({ maxLength: 100 }) }, { additionalProperties: false }) } },
    async (request, reply) => {
      const session = await consoleService.redeem(request.params.token);
      if (!session) {
        return sendPage(
          reply,
          401,
          consoleErrorPage('Login link not valid', 'This login link was already used or has expired. Ask for a new one.'),
        );
      }
      return reply
        .setCookie(CONSOLE_COOKIE, session.sessionId, {
          path: '/',
          httpOnly: true,
          sameSite: 'lax',
          secure: secure(),
          expires: session.expiresAt,
        })
        .header('cache-control', 'no-store')
        .redirect('/console', 303);
    },
  );

  app.get('/console', { schema: { hide: true, querystring: ConsoleQuery } }, async (request, reply) => {
    const sessionId = request.cookies[CONSOLE_COOKIE];
    const session = await consoleService.session(sessionId);
    if (!session || !sessionId) return sendPage(reply, 401, consoleErrorPage('Not signed in', 'Open a console login link to sign in.'));
    return renderConsole(services, reply, session, sessionId, { project: request.query.project, created: request.query.created });
  });

  await app.register(consoleVmRoutes, { services });
};
