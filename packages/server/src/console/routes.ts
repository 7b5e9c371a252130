import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { CONSOLE_CSS, consoleErrorPage, signedOutPage } from './page.ts';
import { CONSOLE_COOKIE } from './service.ts';
import { ConsoleQuery, type ConsoleRouteServices, consoleVmRoutes, formSession, renderConsole } from './vm-routes.ts';

/**
 * The console (CONTRACT §7), served beside the partner API on the same
 * listener: a login link opens a session and lands on `/console`.
 */
export const CONSOLE_SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
} as const;

export const consoleRoutes: FastifyPluginAsyncTypebox<{ services: ConsoleRouteServices }> = async (app, { services }) => {
  const { console: consoleService, options } = services;
  const secure = () => options.publicUrl().startsWith('https://');
  await app.register(cookie);
  // Forms post as application/x-www-form-urlencoded; only the console's routes accept it.
  await app.register(formbody, { bodyLimit: 16 * 1024 });
  // Every console answer: only our own files run or style the page, no page frames it, and the
  // one-time login URL never leaves in a Referer.
  app.addHook('onSend', (_request, reply, payload, done) => {
    reply.headers(CONSOLE_SECURITY_HEADERS);
    done(null, payload);
  });

  app.get('/console/assets/console.css', async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(CONSOLE_CSS),
  );

  // Link previews and mail scanners send HEAD: it answers without looking at the link, so only the
  // person's GET uses it up, and it tells nothing about whether the link is still good.
  app.head('/console/login/:token', async (_request, reply) =>
    reply.code(200).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(),
  );
  app.get(
    '/console/login/:token',
    {
      exposeHeadRoute: false,
      schema: { params: Type.Object({ token: Type.String({ maxLength: 100 }) }, { additionalProperties: false }) },
    },
    async (request, reply) => {
      const session = await consoleService.redeem(request.params.token);
      if (!session) {
        return reply
          .code(401)
          .type('text/html; charset=utf-8')
          .header('cache-control', 'no-store')
          .send(consoleErrorPage('Login link not valid', 'This login link was already used or has expired. Ask for a new one.'));
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

  app.get('/console', { schema: { querystring: ConsoleQuery } }, async (request, reply) => {
    const session = await consoleService.session(request.cookies[CONSOLE_COOKIE]);
    reply.type('text/html; charset=utf-8').header('cache-control', 'no-store');
    if (!session) return reply.code(401).send(consoleErrorPage('Not signed in', 'Open a console login link to sign in.'));
    const { project, created, stopped, started, deleted } = request.query;
    const changed = stopped
      ? { name: stopped, change: 'stop' as const }
      : started
        ? { name: started, change: 'start' as const }
        : deleted
          ? { name: deleted, change: 'delete' as const }
          : undefined;
    return renderConsole(services, reply, session, { project, created, changed });
  });

  // Sign-out: the session ends server-side (a copied cookie stops working too) and the cookie is cleared.
  // A cookie whose session has already ended only needs clearing.
  app.post('/console/logout', { schema: { hide: true } }, async (request, reply) => {
    const sessionId = request.cookies[CONSOLE_COOKIE];
    if (sessionId && (await consoleService.session(sessionId))) {
      if (!(await formSession(services, request, reply))) return reply;
      await consoleService.endSession(sessionId);
      services.consoleSessions.forget(sessionId);
    }
    return reply
      .clearCookie(CONSOLE_COOKIE, { path: '/', httpOnly: true, sameSite: 'lax', secure: secure() })
      .header('cache-control', 'no-store')
      .redirect('/console/signed-out', 303);
  });

  app.get('/console/signed-out', async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(signedOutPage()),
  );

  // The VM form: its script and its POST (issue 15).
  await app.register(consoleVmRoutes, { services });
};
