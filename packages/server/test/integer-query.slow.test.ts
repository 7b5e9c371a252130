import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { buildPartnerApp } from '../src/app/partner-app.ts';
import type { RegisteredRoute } from '../src/infra/http/create-http-app.ts';
import { buildOperatorApp } from '../src/operator/operator-app.ts';
import { http, issueKey, partnerWithToken } from './client.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';

/** Integers written otherwise than in decimal digits, as sent in a URL: JavaScript's `Number` reads them all. */
const NOT_DECIMAL = ['0x10', '1e1', '0b11', '%2B50', '+50', '%205', '5.0', '1_0', '0o17', 'Infinity', ''];

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  pattern?: string;
  minimum?: number;
  maximum?: number;
}

/** A path parameter's value its schema accepts: the route is reached, and the query string is what is judged. */
const SAMPLE_VALUES = ['abcdef', 'abcdefghijkl', `op_${'0'.repeat(26)}`];

function pathFor(route: RegisteredRoute): string {
  const params = (route.schema.params as Schema | undefined)?.properties ?? {};
  return route.url.replace(/:(\w+)/g, (_match, name: string) => {
    const pattern = params[name]?.pattern;
    const value = SAMPLE_VALUES.find((candidate) => pattern === undefined || new RegExp(pattern, 'u').test(candidate));
    assert.ok(value, `${route.url}: no sample value for :${name} matches ${pattern}; add one to SAMPLE_VALUES`);
    return value;
  });
}

/** Each route's integer query parameters, from both APIs' routes as registered: a route added later is covered too. */
function integerParameters(routes: readonly RegisteredRoute[]) {
  const found: { method: string; route: RegisteredRoute; name: string; schema: Schema }[] = [];
  for (const route of routes) {
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      for (const [name, schema] of Object.entries((route.schema.querystring as Schema | undefined)?.properties ?? {})) {
        if ([schema.type].flat().includes('integer')) found.push({ method, route, name, schema });
      }
    }
  }
  return found;
}

const embedded = testDatabases().find((target) => target.name === 'pglite');

describe('integer query parameters take decimal digits only', () => {
  let server: TestServer;
  let partnerRoutes: readonly RegisteredRoute[];
  let operatorRoutes: readonly RegisteredRoute[];
  let token: string;
  before(async () => {
    assert.ok(embedded);
    server = await startTestServer(embedded);
    // Both APIs built as the server builds them, for their routes' schemas; the requests go to the server.
    const logger = pino({ level: 'silent' });
    const partnerApp = await buildPartnerApp(server.services, logger);
    const operatorApp = await buildOperatorApp(server.services, logger, server.operatorToken);
    await Promise.all([partnerApp.ready(), operatorApp.ready()]);
    partnerRoutes = partnerApp.routes;
    operatorRoutes = operatorApp.routes;
    await Promise.all([partnerApp.close(), operatorApp.close()]);
    // A test-mode key: the test helpers' routes answer 404 to a live token before they read the query.
    const partner = await partnerWithToken(server, 'decimal', {
      settings: { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 100_000 } },
    });
    const testKey = await issueKey(server, partner.id, { mode: 'test' });
    token = (await http<{ access_token: string }>(server.partnerUrl, 'POST', '/api/public/v1/auth/token', { body: { api_key: testKey } }))
      .body.access_token;
  });
  after(() => server?.stop());

  const apis = () => [
    { name: 'partner', baseUrl: server.partnerUrl, token, routes: partnerRoutes },
    { name: 'operator', baseUrl: server.operatorUrl, token: server.operatorToken, routes: operatorRoutes },
  ];

  test('every integer query parameter of both APIs refuses 0x10, 1e1, 0b11, +50, " 5", 5.0 with 400 VALIDATION_ERROR naming it, and takes 10', async () => {
    const checked: string[] = [];
    for (const api of apis()) {
      for (const { method, route, name, schema } of integerParameters(api.routes)) {
        const path = pathFor(route);
        const ask = (text: string) => http(api.baseUrl, method, `${path}?${name}=${text}`, { token: api.token });
        for (const text of NOT_DECIMAL) {
          const result = await ask(text);
          const said = `${api.name} ${method} ${route.url}?${name}=${text} → ${result.status} ${result.text}`;
          assert.equal(result.status, 400, said);
          const error = (result.body as { error: { code: string; details?: { errors?: { in: string; field: string }[] } } }).error;
          assert.equal(error.code, 'VALIDATION_ERROR', said);
          assert.ok(
            error.details?.errors?.some((problem) => problem.in === 'query' && problem.field === name),
            `${said}: names the parameter`,
          );
        }
        const ten = String(Math.min(Math.max(10, schema.minimum ?? 10), schema.maximum ?? 10));
        const accepted = await ask(ten);
        const problems =
          (accepted.body as { error?: { details?: { errors?: { in: string; field: string }[] } } }).error?.details?.errors ?? [];
        assert.ok(
          !problems.some((problem) => problem.in === 'query' && problem.field === name),
          `${api.name} ${method} ${route.url}?${name}=${ten} → ${accepted.status} ${accepted.text}`,
        );
        checked.push(`${api.name} ${method} ${route.url} ${name}`);
      }
    }
    // The routes this was written against; more are welcome, fewer mean the enumeration broke.
    for (const expected of ['partner GET /api/public/v1/customers limit', 'partner DELETE /api/public/v1/customers/:id grace_days']) {
      assert.ok(checked.includes(expected), `${expected} was checked (checked: ${checked.join('; ')})`);
    }
    assert.ok(
      checked.some((entry) => entry.startsWith('operator ')),
      'an operator route was checked',
    );
  });

  test('leading zeros are still decimal: limit=007 is a page of 7', async () => {
    const result = await http<{ pagination: { limit: number } }>(server.partnerUrl, 'GET', '/api/public/v1/customers?limit=007', { token });
    assert.equal(result.status, 200, result.text);
    assert.equal(result.body.pagination.limit, 7);
  });
});
