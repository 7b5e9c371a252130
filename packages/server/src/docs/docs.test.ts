import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';

/**
 * The API reference as a browser gets it: the page, every asset it loads (all from this origin, under a
 * policy that allows nothing else), and the document it renders, which must hold every operation of
 * the committed docs/openapi.json with its error codes, and the webhooks.
 */
interface Operation {
  operationId: string;
  summary: string;
  responses: Record<string, { description: string; 'x-error-codes'?: string[] }>;
}
interface Document {
  info: { description: string };
  paths: Record<string, Record<string, Operation>>;
  webhooks: Record<string, unknown>;
  components: { securitySchemes: Record<string, { type: string; scheme?: string }> };
}
const committed = JSON.parse(readFileSync(fileURLToPath(new URL('../../../../docs/openapi.json', import.meta.url)), 'utf8')) as Document;

const target = testDatabases()[0];
if (target) {
  describe('the API reference at /docs', () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    const get = (path: string) => fetch(new URL(path, server.partnerUrl), { redirect: 'manual' });
    const policyOf = (response: Response) => response.headers.get('content-security-policy') ?? '';

    test('/ is a landing page that links the reference and the document, under a same-origin policy', async () => {
      const response = await get('/');
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
      const html = await response.text();
      assert.match(html, /<a href="\/docs">API reference<\/a>/);
      assert.match(html, /<a href="\/api\/public\/v1\/openapi\.json">/);
      assert.match(policyOf(response), /^default-src 'self'; script-src 'self';/);
    });

    test('/docs serves the page, and every asset it loads comes from this origin under a policy that allows only this origin', async () => {
      const redirect = await get('/docs');
      assert.equal(redirect.status, 301);
      assert.equal(redirect.headers.get('location'), '/docs/');
      const response = await get('/docs/');
      assert.equal(response.status, 200);
      const html = await response.text();
      const policy = policyOf(response);
      for (const directive of [
        "default-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "frame-ancestors 'none'",
      ]) {
        assert.ok(policy.includes(directive), `${directive} in ${policy}`);
      }
      assert.doesNotMatch(policy, /https?:|\*/, 'no other origin is allowed');
      // Nothing on the page points elsewhere.
      const references = [...html.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((m) => m[1] ?? '');
      assert.ok(references.length > 0);
      for (const reference of references) assert.doesNotMatch(reference, /^(https?:)?\/\//, `${reference} is on this origin`);
      // The inline configuration runs because the policy names its hash; nothing else inline would.
      const inline = [...html.matchAll(/<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1] ?? '');
      assert.equal(inline.length, 1);
      const hash = createHash('sha256')
        .update(inline[0] ?? '')
        .digest('base64');
      assert.ok(policy.includes(`'sha256-${hash}'`), 'the configuration script is allowed by its hash');
      assert.match(inline[0] ?? '', /"url": "\/api\/public\/v1\/openapi\.json"/);
      assert.match(inline[0] ?? '', /"telemetry": false/);
      assert.match(inline[0] ?? '', /"withDefaultFonts": false/);
      assert.match(inline[0] ?? '', /"preferredSecurityScheme": "bearerToken"/, 'the authentication panel offers the bearer token first');
      // The renderer itself, served from the package.
      const scripts = [...html.matchAll(/<script[^>]*\bsrc="([^"]+)"/g)].map((m) => m[1] ?? '');
      assert.deepEqual(scripts, ['js/scalar.js']);
      const bundle = await get(new URL(scripts[0] ?? '', `${server.partnerUrl}/docs/`).pathname);
      assert.equal(bundle.status, 200);
      assert.match(bundle.headers.get('content-type') ?? '', /javascript/);
      const code = await bundle.text();
      assert.ok(code.length > 1_000_000, 'the whole standalone bundle');
      assert.match(code, /window\.Scalar=\{createApiReference/);
      assert.doesNotMatch(policyOf(bundle), /https?:/);
    });

    test('a path under /docs that the reference does not have answers 404 NOT_FOUND in the envelope', async () => {
      const response = await get('/docs/nothing-here.js');
      assert.equal(response.status, 404);
      const body = (await response.json()) as { status: string; error: { code: string } };
      assert.deepEqual([body.status, body.error.code], ['error', 'NOT_FOUND']);
    });

    test('the document the page renders has every operation of docs/openapi.json, its error codes, and the webhooks', async () => {
      const response = await get('/api/public/v1/openapi.json');
      assert.equal(response.status, 200);
      const served = (await response.json()) as Document;
      let operations = 0;
      for (const [path, methods] of Object.entries(committed.paths)) {
        for (const [method, operation] of Object.entries(methods)) {
          operations++;
          const rendered = served.paths[path]?.[method];
          assert.ok(rendered, `${method.toUpperCase()} ${path} (${operation.operationId}) is in the served document`);
          assert.equal(rendered.operationId, operation.operationId);
          assert.equal(rendered.summary, operation.summary);
          for (const [status, answer] of Object.entries(rendered.responses)) {
            // The codes are shown where every renderer shows something: the response's description.
            if (answer['x-error-codes'])
              assert.equal(answer.description, `Error codes: ${answer['x-error-codes'].join(', ')}.`, `${operation.operationId} ${status}`);
          }
        }
      }
      assert.ok(operations >= 30);
      assert.ok(served.paths['/api/public/v1/events/stream']?.get, 'the event stream is documented');
      assert.deepEqual(Object.keys(served.webhooks).sort(), Object.keys(committed.webhooks).sort());
      // The page opens with the introduction: how an API key becomes an access token, its lifetime and scopes.
      assert.match(served.info.description, /## Authentication: from API key to access token/);
      assert.match(served.info.description, /POST \/api\/public\/v1\/auth\/token/);
      assert.match(served.info.description, /at most 15 minutes/);
      assert.match(served.info.description, /\| `customers:sso` \|/);
      assert.deepEqual(
        [served.components.securitySchemes.bearerToken?.type, served.components.securitySchemes.bearerToken?.scheme],
        ['http', 'bearer'],
      );
      assert.ok(Object.keys(served.webhooks).includes('customer.ready'));
    });
  });
}
