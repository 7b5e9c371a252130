import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Validator } from '@seriousme/openapi-schema-validator';
import { http } from '../../test/client.ts';
import { checkContract } from '../../test/contract.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { ERROR_CATALOGUE } from '../infra/errors/catalogue.ts';
import { OPERATION_ERRORS } from './document.ts';

const COMMITTED = fileURLToPath(new URL('../../../../docs/openapi.json', import.meta.url));

interface Operation {
  operationId?: string;
  tags?: string[];
  summary?: string;
  description?: string;
  requestBody?: { required?: boolean };
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string }[];
  responses: Record<string, { description?: string; headers?: Record<string, unknown> }>;
}
interface Document {
  openapi: string;
  info: { description: string; contact?: unknown; license?: unknown };
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, Operation>>;
  webhooks: Record<string, unknown>;
  components: { securitySchemes: Record<string, unknown> };
}

// The document does not depend on the database: one is enough.
const target = testDatabases()[0];
if (target) {
  describe('the OpenAPI document', () => {
    let server: TestServer;
    let document: Document;
    before(async () => {
      server = await startTestServer(target);
      const fetched = await http<Document>(server.partnerUrl, 'GET', '/api/public/v1/openapi.json');
      assert.equal(fetched.status, 200, fetched.text);
      document = fetched.body;
    });
    after(() => server.stop());

    test('GET /api/public/v1/openapi.json needs no token and is a valid OpenAPI 3.1 document', async () => {
      assert.equal(document.openapi, '3.1.0');
      const validator = new Validator();
      const result = await validator.validate(structuredClone(document) as never);
      assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    });

    test('every $ref points into the document', () => {
      const refs = [...JSON.stringify(document).matchAll(/"\$ref":"#\/([^"]+)"/g)].map((m) => m[1] ?? '');
      assert.ok(refs.length > 0);
      for (const ref of new Set(refs)) {
        const target = ref.split('/').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], document);
        assert.ok(target, `#/${ref} resolves`);
      }
    });

    test('the contract check refuses a body that does not match and a status the document does not list', () => {
      const headers = new Headers({ 'x-request-id': 'req_1', 'x-ratelimit-limit': '1', 'x-ratelimit-remaining': '1' });
      const url = `${server.partnerUrl}/api/public/v1/customers/acme/quota`;
      assert.throws(
        () => checkContract('GET', url, 200, headers, { status: 'success', data: { customer_id: 7 } }),
        /does not match getQuota/,
      );
      assert.throws(() => checkContract('GET', url, 418, headers, {}), /does not list/);
      assert.throws(() => checkContract('GET', url, 200, new Headers(), {}), /lacks the documented header X-Request-Id/);
      const envelope = { status: 'error', error: { code: 'NOT_FOUND', message: 'm', request_id: 'req_1' } };
      checkContract('GET', url, 404, headers, envelope);
      // A documented status with a code the operation does not list for it.
      const busy = { status: 'error', error: { code: 'BUSY', message: 'm', request_id: 'req_1' } };
      assert.throws(() => checkContract('GET', url, 409, headers, busy), /does not list/);
      assert.throws(
        () => checkContract('GET', url, 404, headers, { ...busy }),
        /answered 404 BUSY, which the document does not list for it/,
      );
    });

    test('the committed docs/openapi.json is the generated one (run `npm run openapi` after changing a route)', () => {
      const committed = JSON.parse(readFileSync(COMMITTED, 'utf8')) as unknown;
      assert.deepEqual(committed, document, 'docs/openapi.json is stale: run `npm run openapi` and commit it');
    });

    test('every partner route is documented, with its scope, its error codes, headers and Idempotency-Key', () => {
      const routes = server.partnerRoutes();
      assert.ok(routes.length > 20);
      for (const { method, url, scope } of routes) {
        const path = url.replace(/:([A-Za-z_]+)/g, '{$1}');
        const operation = document.paths[path]?.[method.toLowerCase()];
        assert.ok(operation, `${method} ${path} is in the document`);
        assert.ok(operation.operationId, `${method} ${path} has an operationId`);
        assert.ok(operation.operationId in OPERATION_ERRORS, `${operation.operationId} lists its error codes in OPERATION_ERRORS`);
        if (scope === undefined) {
          assert.deepEqual(operation.security, [], `${method} ${path} is public`);
        } else {
          assert.deepEqual(
            operation.security,
            [{ partnerToken: scope === 'any' ? [] : [scope] }, { bearerToken: [] }],
            `${method} ${path} needs ${scope}, as an OAuth token or a pasted bearer token`,
          );
          for (const status of ['400', '401', '403', '429', '500', '503']) {
            assert.ok(operation.responses[status], `${method} ${path} documents ${status}`);
          }
          const ok = Object.entries(operation.responses).find(([status]) => status.startsWith('2'));
          assert.ok(ok?.[1].headers?.['X-RateLimit-Remaining'], `${method} ${path} documents the rate-limit headers`);
          assert.ok(ok?.[1].headers?.['X-Request-Id']);
        }
        const idempotent = (operation.parameters ?? []).some((p) => p.in === 'header' && p.name === 'Idempotency-Key');
        assert.equal(idempotent, scope !== undefined && method !== 'GET', `${method} ${path}: Idempotency-Key on authenticated mutations`);
      }
    });

    test('every operation is grouped under a declared tag and says what it does and what each answer is', () => {
      const tags = document.tags.map((tag) => tag.name);
      for (const tag of document.tags) assert.ok(tag.description.length > 20, `tag ${tag.name} is described`);
      for (const [path, operations] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          const name = `${method.toUpperCase()} ${path}`;
          assert.equal(operation.tags?.length, 1, `${name} has one tag`);
          assert.ok(tags.includes(operation.tags?.[0] ?? ''), `${name}: its tag ${operation.tags?.[0]} is declared`);
          assert.ok((operation.summary ?? '').length > 10, `${name} has a summary`);
          assert.ok((operation.description ?? '').length > 20, `${name} has a description`);
          for (const [status, response] of Object.entries(operation.responses)) {
            assert.ok(response.description && response.description !== 'Default Response', `${name} describes its ${status}`);
          }
        }
      }
      assert.ok(document.info.contact && document.info.license, 'the document names a contact and a licence');
    });

    test('the bodies of suspend and resume may be left out; every other body is required', () => {
      for (const [path, operations] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          if (!operation.requestBody) continue;
          const optional = ['suspendCustomer', 'resumeCustomer'].includes(operation.operationId ?? '');
          assert.equal(operation.requestBody.required, !optional, `${method.toUpperCase()} ${path}`);
        }
      }
    });

    test("each operation's own error codes are documented under their status", () => {
      const putQuota = document.paths['/api/public/v1/customers/{id}/quota']?.put as Operation & {
        responses: Record<string, { description: string }>;
      };
      for (const code of OPERATION_ERRORS.putQuota ?? []) {
        const status = String(ERROR_CATALOGUE[code].status);
        assert.match(putQuota.responses[status]?.description ?? '', new RegExp(`\\b${code}\\b`), `${code} under ${status}`);
      }
      assert.ok(putQuota.responses['503']?.description.includes('GPU_USAGE_UNAVAILABLE'));
    });

    test('the webhooks section has every event kind and ping, with the signature headers', () => {
      // partner-api.md, Event kinds.
      const specified = [
        'ping',
        'customer.ready',
        'customer.failed',
        'customer.suspended',
        'customer.resumed',
        'customer.deletion_scheduled',
        'customer.deleted',
        'customer.quota_changed',
        'customer.plan_changed',
        'project.ready',
        'project.failed',
        'project.deleted',
      ];
      assert.deepEqual(Object.keys(document.webhooks).sort(), specified.sort());
      const ready = document.webhooks['customer.ready'] as {
        post: { security: Record<string, string[]>[]; parameters: { name: string }[] };
      };
      assert.deepEqual(ready.post.security, [{ webhookSignature: [] }]);
      const scheme = document.components.securitySchemes.webhookSignature as {
        type: string;
        in: string;
        name: string;
        description: string;
      };
      assert.deepEqual([scheme.type, scheme.in, scheme.name], ['apiKey', 'header', 'X-Service-Signature']);
      assert.match(scheme.description, /HMAC-SHA256 of `<X-Service-Timestamp>\.<raw body>`/);
      assert.deepEqual(
        ready.post.parameters.map((p) => p.name),
        ['X-Service-Timestamp', 'X-Service-Event', 'X-Service-Delivery'],
      );
    });
  });
}
