import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { http, OPERATOR_API, PARTNER_API, partnerWithToken } from '../../../test/client.ts';
import { fixtureRoutes } from '../../../test/fixtures.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';

/**
 * Property: whatever a caller sends (any JSON or non-JSON body, any content
 * type, any query string), the answer is the error envelope with a 4xx, or a
 * success; never a 500, never a framework-default body.
 */
const target = testDatabases()[0];
if (target) {
  describe('bad input never answers 500', () => {
    let server: TestServer;
    let token: string;
    before(async () => {
      server = await startTestServer(target, { partnerRoutes: [fixtureRoutes().routes] });
      ({ token } = await partnerWithToken(server, 'fuzz', {
        settings: { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 100_000 } },
      }));
    });
    after(() => server.stop());

    const bodies = fc.oneof(
      fc.json().map((text) => ({ text, type: 'application/json' })),
      fc.string().map((text) => ({ text, type: 'application/json' })),
      fc.string().map((text) => ({ text, type: 'application/x-www-form-urlencoded' })),
      fc
        .tuple(fc.string(), fc.constantFrom('text/plain', 'application/xml', 'multipart/form-data', 'application/json; charset=latin1', ''))
        .map(([text, type]) => ({ text, type })),
    );

    const targets = [
      { base: 'partner', path: `${PARTNER_API}/auth/token`, auth: false },
      { base: 'partner', path: `${PARTNER_API}/test-fixtures/effects`, auth: true },
      { base: 'operator', path: `${OPERATOR_API}/partners`, auth: true },
      { base: 'operator', path: `${OPERATOR_API}/partners/fuzz/keys`, auth: true },
    ] as const;

    test('POST bodies of every shape', async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...targets), bodies, fc.string({ maxLength: 40 }), async (where, body, idempotencyKey) => {
          const headers: Record<string, string> = {};
          if (body.type) headers['content-type'] = body.type;
          if (idempotencyKey) headers['idempotency-key'] = idempotencyKey.replace(/[\r\n]/g, '');
          const baseUrl = where.base === 'partner' ? server.partnerUrl : server.operatorUrl;
          const credential = where.base === 'partner' ? token : server.operatorToken;
          const result = await http(baseUrl, 'POST', where.path, {
            rawBody: body.text,
            headers,
            ...(where.auth ? { token: credential } : {}),
          });
          assert.ok(result.status < 500, `${where.path} ${JSON.stringify(body)} → ${result.status} ${result.text}`);
          if (result.status >= 400) {
            const envelope = result.body as { status: string; error: { code: string; request_id: string } };
            assert.equal(envelope.status, 'error', result.text);
            assert.equal(envelope.error.request_id, result.headers.get('x-request-id'));
          }
        }),
        { numRuns: 150 },
      );
    });

    test('query strings and paths of every shape', async () => {
      await fc.assert(
        fc.asyncProperty(fc.string(), fc.string(), async (query, segment) => {
          const path = `${PARTNER_API}/test-fixtures/items/${encodeURIComponent(segment) || 'x'}?${encodeURI(query)}`;
          for (const url of [`${PARTNER_API}/test-fixtures/items?${encodeURI(query)}`, path, `${OPERATOR_API}/audit?${encodeURI(query)}`]) {
            const base = url.startsWith(OPERATOR_API) ? server.operatorUrl : server.partnerUrl;
            const result = await http(base, 'GET', url, { token: url.startsWith(OPERATOR_API) ? server.operatorToken : token });
            assert.ok(result.status < 500, `${url} → ${result.status} ${result.text}`);
            if (result.status >= 400) assert.equal((result.body as { status: string }).status, 'error', result.text);
          }
        }),
        { numRuns: 100 },
      );
    });
  });
}
