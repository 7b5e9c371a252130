import { createHash } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { ApiError } from '../infra/errors/catalogue.ts';

/**
 * `GET /docs` on the partner listener: the API reference, rendered in the browser from the OpenAPI
 * document by Scalar's standalone bundle, which the `@scalar/fastify-api-reference` package ships and
 * this server serves itself (`/docs/js/scalar.js`): no request leaves the page's origin. `GET /` is a
 * small landing page that links the reference, the document and the health checks.
 *
 * The renderer is loaded on the first visit to `/docs`, not at start: Scalar's package holds its whole
 * browser bundle (4.8 MB) as a string, and with its dependencies it costs every server 33-35 MB of
 * resident memory. Its plugin runs in a Fastify instance of its own, made on that first visit,
 * which this server's `/docs` routes ask through `inject`.
 *
 * Every response here carries a Content-Security-Policy that allows this origin only. The page's one
 * inline script (the renderer's configuration) is allowed by its hash, computed from the page as
 * served, so nothing else inline can run. Styles may be inline: the renderer injects its own.
 */
export const DOCS_PATH = '/docs';

/**
 * What the reference shows and leaves out: nothing that calls a third party (telemetry, fonts, AI, MCP).
 * It opens with the document's introduction (how a key becomes a token), and its authentication panel
 * offers the bearer scheme first: paste the `access_token` of `POST /auth/token` and try any call.
 */
function scalarConfiguration(documentUrl: string) {
  return {
    authentication: { preferredSecurityScheme: 'bearerToken' },
    url: documentUrl,
    pageTitle: 'Tenantry partner API reference',
    telemetry: false,
    withDefaultFonts: false,
    agent: { disabled: true },
    mcp: { disabled: true },
    showDeveloperTools: 'never' as const,
    documentDownloadType: 'json' as const,
    hideModels: false,
    defaultOpenAllTags: true,
  };
}

const inlineScripts = (html: string): string[] =>
  [...html.matchAll(/<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/g)].map((match) => match[1] ?? '');

/** The page's policy: this origin, plus the exact inline scripts of this page (by hash). */
export function contentSecurityPolicy(html: string | undefined): string {
  const hashes =
    html === undefined ? [] : inlineScripts(html).map((script) => `'sha256-${createHash('sha256').update(script).digest('base64')}'`);
  return [
    "default-src 'self'",
    `script-src 'self'${hashes.map((hash) => ` ${hash}`).join('')}`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

const LANDING = (documentUrl: string) => `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Tenantry partner API</title>
    <style>
      body { font: 16px/1.5 system-ui, sans-serif; max-width: 44rem; margin: 3rem auto; padding: 0 1rem; color: #1f2328; }
      code { background: #f3f4f6; padding: 0 .25rem; border-radius: 4px; }
    </style>
  </head>
  <body>
    <h1>Tenantry partner API</h1>
    <p>Manage customers, projects, users, quotas and webhooks of a GPU and VM cloud as its reseller.</p>
    <ul>
      <li><a href="${DOCS_PATH}">API reference</a>: every operation, its scope and error codes, and the webhook events</li>
      <li><a href="${documentUrl}">OpenAPI document</a> (<code>${documentUrl}</code>)</li>
      <li>Authenticate: exchange an API key at <code>POST /api/public/v1/auth/token</code> for a bearer token</li>
      <li>Health: <a href="/healthz"><code>/healthz</code></a>, <a href="/readyz"><code>/readyz</code></a></li>
    </ul>
  </body>
</html>
`;

export async function docsRoutes(app: FastifyInstance, opts: { documentUrl: string }): Promise<void> {
  const { documentUrl } = opts;
  // The policy goes on every page and asset of the reference, and on the landing page.
  app.addHook('onSend', (request, reply: FastifyReply, payload, done) => {
    const path = request.url.split('?')[0] ?? '';
    if (path === '/' || path === DOCS_PATH || path.startsWith(`${DOCS_PATH}/`)) {
      const type = String(reply.getHeader('content-type') ?? '');
      reply.header(
        'content-security-policy',
        contentSecurityPolicy(type.startsWith('text/html') && typeof payload === 'string' ? payload : undefined),
      );
      reply.header('x-content-type-options', 'nosniff');
      reply.header('referrer-policy', 'no-referrer');
    }
    done(null, payload);
  });

  let renderer: Promise<FastifyInstance> | undefined;
  const reference = async (request: FastifyRequest, reply: FastifyReply) => {
    renderer ??= loadRenderer(documentUrl).catch((error: unknown) => {
      renderer = undefined;
      throw error;
    });
    const answer = await (await renderer).inject({
      method: 'GET',
      url: request.url,
      headers: { host: request.headers.host ?? 'localhost' },
    });
    // A path the renderer does not serve gets this server's 404, in the envelope.
    if (answer.statusCode === 404) throw new ApiError('NOT_FOUND', `No route matches GET ${request.url.split('?')[0]}.`);
    reply.code(answer.statusCode);
    for (const name of ['content-type', 'location', 'cache-control', 'etag', 'last-modified'] as const) {
      const value = answer.headers[name];
      if (value !== undefined) reply.header(name, value);
    }
    // Text, so the policy hook above can hash the page's inline script.
    return reply.send(answer.body);
  };
  app.addHook('onClose', async () => {
    if (renderer) await (await renderer.catch(() => undefined))?.close();
  });
  // The paths Scalar's plugin serves (the page, its trailing-slash redirect, the bundle): any other path
  // under /docs is nobody's, and answers 404 like every unknown path.
  for (const path of [DOCS_PATH, `${DOCS_PATH}/`, `${DOCS_PATH}/js/scalar.js`]) app.get(path, { schema: { hide: true } }, reference);

  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.type('text/html; charset=utf-8').send(LANDING(documentUrl)));
}

/** Scalar's plugin, alone in a Fastify instance, at the path this server serves it on. */
async function loadRenderer(documentUrl: string): Promise<FastifyInstance> {
  const { default: scalar } = await import('@scalar/fastify-api-reference');
  const renderer = Fastify({ logger: false });
  await renderer.register(scalar, { routePrefix: DOCS_PATH, configuration: scalarConfiguration(documentUrl) });
  await renderer.ready();
  return renderer;
}
