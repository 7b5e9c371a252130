import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { assertError, fieldErrors, http, operatorApi, PARTNER_API, partnerApi, partnerWithToken } from '../../../test/client.ts';
import { fixtureRoutes } from '../../../test/fixtures.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';
import { eventually } from '../../../test/provisioning.ts';
import { securitySuite } from '../../../test/security-suite.ts';

for (const target of testDatabases()) {
  describe(`cross-cutting HTTP rules [${target.name}]`, () => {
    let server: TestServer;
    let token: string;
    let key: string;
    before(async () => {
      server = await startTestServer(target, { partnerRoutes: [fixtureRoutes().routes] });
      ({ token, key } = await partnerWithToken(server, 'rules', {
        settings: { limits: { rate_limit_per_minute: 10_000, rate_limit_burst: 10_000 } },
      }));
    });
    after(() => server.stop());

    test('an unknown route answers 404 NOT_FOUND in the envelope, on both APIs', async () => {
      const error = assertError(await partnerApi(server, 'GET', '/no/such/route', { token }), 404, 'NOT_FOUND');
      assert.match(error.message, /No route matches GET/);
      // (`/` on the partner listener is the landing page that links the API reference.)
      assertError(await http(server.partnerUrl, 'GET', '/nothing-here'), 404, 'NOT_FOUND');
      assertError(await operatorApi(server, 'GET', '/nothing-here'), 404, 'NOT_FOUND');
    });

    test('a wrong method answers 405 METHOD_NOT_ALLOWED with Allow', async () => {
      const result = await partnerApi(server, 'DELETE', '/auth/whoami', { token });
      const error = assertError(result, 405, 'METHOD_NOT_ALLOWED');
      assert.deepEqual(error.details, { method: 'DELETE', allowed: ['GET'] });
      assert.equal(result.headers.get('allow'), 'GET');
    });

    test('malformed JSON, a wrong content type, an empty JSON body and an oversized body answer 400 VALIDATION_ERROR', async () => {
      const malformed = await partnerApi(server, 'POST', '/auth/token', {
        rawBody: '{"api_key": ',
        headers: { 'content-type': 'application/json' },
      });
      assert.match(JSON.stringify(assertError(malformed, 400, 'VALIDATION_ERROR').details), /not valid JSON/);
      const xml = await partnerApi(server, 'POST', '/test-fixtures/effects', {
        token,
        rawBody: '<x/>',
        headers: { 'content-type': 'application/xml' },
      });
      assert.deepEqual(fieldErrors(assertError(xml, 400, 'VALIDATION_ERROR'))[0]?.field, 'content-type');
      // The form encoding is accepted only by the token endpoint.
      const form = await partnerApi(server, 'POST', '/test-fixtures/effects', {
        token,
        rawBody: 'name=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      assertError(form, 400, 'VALIDATION_ERROR');
      const empty = await partnerApi(server, 'POST', '/test-fixtures/effects', {
        token,
        rawBody: '',
        headers: { 'content-type': 'application/json' },
      });
      assertError(empty, 400, 'VALIDATION_ERROR');
      const huge = await partnerApi(server, 'POST', '/test-fixtures/effects', { token, body: { name: 'x', note: 'y'.repeat(70_000) } });
      assert.match(JSON.stringify(assertError(huge, 400, 'VALIDATION_ERROR').details), /larger than the limit of 65536 bytes/);
    });

    test('unknown and invalid fields are each named in details.errors', async () => {
      const result = await partnerApi(server, 'POST', '/test-fixtures/effects', { token, body: { name: 42, colour: 'red', size: 1 } });
      const error = assertError(result, 400, 'VALIDATION_ERROR');
      const problems = fieldErrors(error)
        .map((p) => `${p.in}:${p.field}`)
        .sort();
      assert.deepEqual(problems, ['body:colour', 'body:name', 'body:size']);
      const missing = await partnerApi(server, 'POST', '/test-fixtures/effects', { token, body: {} });
      assert.deepEqual(assertError(missing, 400, 'VALIDATION_ERROR').details?.errors, [
        { in: 'body', field: 'name', message: 'is required' },
      ]);
      const notObject = await partnerApi(server, 'POST', '/test-fixtures/effects', { token, body: [1, 2] });
      assertError(notObject, 400, 'VALIDATION_ERROR');
    });

    test('bad query parameters answer 400 naming the parameter', async () => {
      for (const query of ['limit=0', 'limit=201', 'limit=abc', 'limit=1.5', 'color=green', 'unknown=1', 'cursor=']) {
        const result = await partnerApi(server, 'GET', `/test-fixtures/items?${query}`, { token });
        const error = assertError(result, 400, 'VALIDATION_ERROR');
        const field = query.split('=')[0];
        assert.ok(
          fieldErrors(error).some((p) => p.in === 'query' && p.field === field),
          `${query}: ${result.text}`,
        );
      }
    });

    test('the token endpoint without a body, or with a body of another content type, answers 400', async () => {
      assertError(await partnerApi(server, 'POST', '/auth/token'), 400, 'VALIDATION_ERROR');
      const text = await partnerApi(server, 'POST', '/auth/token', { rawBody: 'tnt_live_x', headers: { 'content-type': 'text/plain' } });
      assertError(text, 400, 'VALIDATION_ERROR');
    });

    test('a malformed URL answers 400 in the envelope, with X-Request-Id', async () => {
      const result = await http(server.partnerUrl, 'GET', `${PARTNER_API}/auth/whoami%zz`, { token });
      assertError(result, 400, 'VALIDATION_ERROR');
    });

    test('a route without query parameters refuses any', async () => {
      const error = assertError(await partnerApi(server, 'GET', '/auth/whoami?limit=5', { token }), 400, 'VALIDATION_ERROR');
      assert.deepEqual(fieldErrors(error), [{ in: 'query', field: 'limit', message: 'is not a known field' }]);
    });

    test('an unexpected failure answers 500 INTERNAL_ERROR; the stack is in the log only', async () => {
      const result = await partnerApi(server, 'POST', '/test-fixtures/fail', { token });
      const error = assertError(result, 500, 'INTERNAL_ERROR');
      assert.doesNotMatch(result.text, /secret internals/);
      const logged = server.logs.find((line) => line.request_id === error.request_id && line.msg === 'unhandled error');
      assert.ok(logged, 'the failure is logged with its request id');
      assert.match(JSON.stringify(logged), /fixture failure with secret internals/);
      assert.match(JSON.stringify(logged), /stack/);
    });

    test('X-Request-Id is on every response, success included, and ids are unique', async () => {
      const ids = new Set<string>();
      for (let i = 0; i < 5; i++) {
        const result = await partnerApi(server, 'GET', '/auth/whoami', { token });
        assert.equal(result.status, 200);
        ids.add(result.headers.get('x-request-id') ?? '');
      }
      const health = await http(server.partnerUrl, 'GET', '/healthz');
      assert.ok(health.headers.get('x-request-id'));
      assert.equal(ids.size, 5);
    });

    test('one JSON log line per request with request id, partner, route, status and latency; no key or token in any line', async () => {
      const result = await partnerApi(server, 'GET', '/auth/whoami', { token });
      const id = result.headers.get('x-request-id');
      const line = server.logs.find((l) => l.request_id === id && l.msg === 'request');
      assert.ok(line, 'a request line');
      assert.equal(line.partner, 'rules');
      assert.equal(line.route, `${PARTNER_API}/auth/whoami`);
      assert.equal(line.status, 200);
      assert.equal(typeof line.latency_ms, 'number');
      const raw = server.rawLogs();
      assert.ok(!raw.includes(token), 'no access token in the logs');
      assert.ok(!raw.includes(key), 'no API key in the logs');
      assert.ok(!raw.includes(key.split('_')[4] ?? '-'), 'no key secret in the logs');
      assert.ok(!raw.includes(server.operatorToken), 'no operator token in the logs');
    });

    test('/healthz and /readyz answer on both listeners', async () => {
      for (const base of [server.partnerUrl, server.operatorUrl]) {
        assert.deepEqual((await http(base, 'GET', '/healthz')).body, { status: 'ok' });
        const ready = await http<{ status: string; details: { os_images: { status: string; entries: number } } }>(base, 'GET', '/readyz');
        assert.equal(ready.body.status, 'ok');
        assert.equal(ready.body.details.os_images.status, 'ok', 'the bundled catalogue is read at start-up');
        assert.ok(ready.body.details.os_images.entries > 0);
      }
    });

    test('draining: the request in flight completes with Connection: close; an idle keep-alive connection is closed; new connections are refused', async () => {
      const fixtures = fixtureRoutes();
      const other = await startTestServer(target, { partnerRoutes: [fixtures.routes] });
      const partner = await partnerWithToken(other, 'drain');
      const port = Number(new URL(other.partnerUrl).port);
      const auth = `Authorization: Bearer ${partner.token}\r\nHost: x\r\n`;
      const talk = () => {
        const socket = connect(port, '127.0.0.1');
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
        });
        // A connection the server closes under us is an outcome here, not a failure.
        socket.on('error', () => {});
        return { socket, ended: once(socket, 'close').then(() => text) };
      };
      // A keep-alive client with nothing in flight: a load balancer's pooled connection.
      const idle = talk();
      idle.socket.write(`GET /api/public/v1/auth/whoami HTTP/1.1\r\n${auth}\r\n`);
      await eventually(
        async () => idle.socket.bytesRead,
        (read) => read > 0,
      );
      const slow = talk();
      slow.socket.write(`POST /api/public/v1/test-fixtures/slow HTTP/1.1\r\n${auth}Content-Length: 0\r\n\r\n`);
      await fixtures.control.slowStarted;
      const closed = other.close();
      await eventually(
        () =>
          fetch(`${other.partnerUrl}/healthz`).then(
            () => 'open',
            () => 'refused',
          ),
        (state) => state === 'refused',
      );
      const idleAnswers = await idle.ended;
      assert.equal(idleAnswers.split('HTTP/1.1 ').length - 1, 1, 'the idle connection is closed, not held open until its timeout');
      fixtures.control.releaseSlow();
      const completed = await slow.ended;
      assert.match(completed, /^HTTP\/1\.1 200 /, 'the request in flight completes');
      assert.match(completed, /\r\nconnection: close\r\n/i, 'and tells its client to go elsewhere');
      await closed;
      await other.stop();
    });

    describe('shared security suite', () => {
      securitySuite(
        () => server,
        [
          { method: 'GET', path: '/auth/whoami', scope: 'any' },
          { method: 'POST', path: '/test-fixtures/effects', scope: 'customers:write', body: { name: 'sec' } },
          { method: 'GET', path: '/test-fixtures/sso-only', scope: 'customers:sso' },
          { method: 'GET', path: '/test-fixtures/usage-only', scope: 'usage:read' },
          {
            method: 'GET',
            path: '/test-fixtures/items/{name}',
            scope: 'customers:read',
            owned: async (ownerToken) => {
              const whoami = await partnerApi<{ data: { partner: { id: string } } }>(server, 'GET', '/auth/whoami', { token: ownerToken });
              await sql`insert into fixture_items values (${whoami.body.data.partner.id}, 'live', 'owned-item', 'red')`.execute(
                server.database.db,
              );
              return '/test-fixtures/items/owned-item';
            },
          },
        ],
      );
    });
  });
}
