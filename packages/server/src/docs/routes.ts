import { createHash } from 'node:crypto';
import scalar from '@scalar/fastify-api-reference';
import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * `GET /docs` on the partner listener: the API reference, rendered in the browser from the OpenAPI
 * document by Scalar's standalone bundle, which the `@scalar/fastify-api-reference` package ships and
 * this server serves itself (`/docs/js/scalar.js`): no request leaves the page's origin. `GET /` is a
 * small landing page that links the reference, the document and the health checks.
 *
 * Every response here carries a Content-Security-Policy that allows this origin only. The page's one
 * inline script (the renderer's configuration) is allowed by its hash, computed from the page as
 * served, so nothing else inline can run. Styles may be inline: the renderer injects its own.
 */
export const DOCS_PATH = '/docs';

/** What the reference shows and leaves out: nothing that calls a third party (telemetry, fonts, AI, MCP). */
function scalarConfiguration(documentUrl: string) {
  return {
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

  await app.register(scalar, { routePrefix: DOCS_PATH, configuration: scalarConfiguration(documentUrl) });

  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.type('text/html; charset=utf-8').send(LANDING(documentUrl)));
}
