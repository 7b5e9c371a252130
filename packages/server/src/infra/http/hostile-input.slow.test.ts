import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, fieldErrors, http, partnerApi, rawHttp } from '../../../test/client.ts';
import { consoleCookie } from '../../../test/console-session.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../../test/provisioning.ts';

/**
 * Issue 13, sections 4 and 5: text PostgreSQL cannot store is refused with 400 naming the field
 * (in the one validator every schema goes through); what Node's HTTP parser refuses still gets
 * the envelope; a repeated Authorization header is refused; cursors are opaque.
 */
for (const target of testDatabases()) {
  describe(`hostile input [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'hostile');
      await activeCustomer(server, p.live, 'target');
      await activeCustomer(server, p.test, 'target');
    });
    after(() => server.stop());

    test('a NUL character or a lone surrogate in any text field answers 400 VALIDATION_ERROR naming it', async () => {
      const nul = 'a\u0000b';
      const lone = 'a\ud800b';
      const cases: [string, string, string, Record<string, unknown> | undefined, string, string][] = [
        [
          'live',
          'POST',
          '/customers',
          { id: 'nul-1', display_name: nul, owner: { username: 'o', email: 'o@n.example' } },
          'body',
          'display_name',
        ],
        [
          'live',
          'POST',
          '/customers',
          { id: 'nul-2', external_id: lone, owner: { username: 'o', email: 'o@n.example' } },
          'body',
          'external_id',
        ],
        [
          'live',
          'POST',
          '/customers',
          { id: 'nul-3', owner: { username: 'o', email: 'o@n.example', first_name: nul } },
          'body',
          'owner.first_name',
        ],
        ['live', 'POST', '/customers/target/suspend', { reason: nul }, 'body', 'reason'],
        ['live', 'POST', '/customers/target/users', { username: 'x', email: 'x@n.example', last_name: lone }, 'body', 'last_name'],
        ['live', 'GET', `/customers?external_id=${encodeURIComponent(nul)}`, undefined, 'query', 'external_id'],
        ['live', 'GET', `/customers/${encodeURIComponent(nul)}`, undefined, 'path', 'id'],
        ['live', 'DELETE', `/customers/target/users/${encodeURIComponent(nul)}`, undefined, 'path', 'username'],
        [
          'test',
          'POST',
          '/test-helpers/failures',
          { type: 'customer.create', code: 'PROVISIONING_FAILED', message: nul },
          'body',
          'message',
        ],
      ];
      for (const [mode, method, path, body, where, field] of cases) {
        const token = mode === 'live' ? p.live : p.test;
        const result = await partnerApi(server, method, path, { token, ...(body ? { body } : {}) });
        const error = assertError(result, 400, 'VALIDATION_ERROR');
        const problems = fieldErrors(error);
        assert.ok(
          problems.some((problem) => problem.in === where && problem.field === field),
          `${method} ${path}: ${JSON.stringify(problems)}`,
        );
      }
      // An object key holding NUL is named too (a customer's project caps are keyed by project name).
      const keyed = await partnerApi(server, 'PUT', '/customers/target/quota', {
        token: p.live,
        body: { revision: 1, quota: { vcpu: 1, memory_gib: 1, storage_gib: 1, gpus: {} }, project_caps: { 'bad\u0000name': {} } },
      });
      assert.ok(
        fieldErrors(assertError(keyed, 400, 'VALIDATION_ERROR')).some((problem) =>
          /field name must not contain the NUL/.test(problem.message),
        ),
      );
      // Nothing was written by any of them.
      const list = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/customers', { token: p.live });
      assert.deepEqual(
        list.body.data.map((c) => c.id),
        ['target'],
      );
    });

    /**
     * Sends `request` as written and reads until the server closes. `halfClose` ends the sending side
     * at once: Node's HTTP server then drops a request still waiting for the database, so a request
     * answered asynchronously is sent without it (the server closes an HTTP/1.0 connection itself).
     */
    const raw = (request: string, base = server.partnerUrl, halfClose = true) => rawHttp(Number(new URL(base).port), request, halfClose);
    const envelopeOf = (answer: string) => {
      const [head, body] = answer.split('\r\n\r\n') as [string, string];
      const requestId = /x-request-id: (req_\w+)/i.exec(head)?.[1];
      const parsed = JSON.parse(body) as { status: string; error: { code: string; request_id: string; message: string } };
      assert.equal(parsed.status, 'error');
      assert.equal(parsed.error.request_id, requestId, 'the envelope names the X-Request-Id');
      return { head, error: parsed.error };
    };

    test('an HTTP/1.1 request without Host answers 400 VALIDATION_ERROR in the envelope, on both APIs; HTTP/1.0 needs none', async () => {
      const { cookie } = await consoleCookie(server, p.live, 'target', 'owner');
      const namespace = 'hostile-target-default';
      const list = await http(server.partnerUrl, 'GET', `/api/create-vm/${namespace}/os-images`, { headers: { cookie } });
      assert.equal(list.status, 200, 'the session is now cached: the next read would be answered before the framework');
      for (const [base, request] of [
        [server.partnerUrl, `GET /api/public/v1/auth/whoami HTTP/1.1\r\nAuthorization: Bearer ${p.live}\r\n\r\n`],
        [server.partnerUrl, `GET /api/create-vm/${namespace}/os-images HTTP/1.1\r\nCookie: ${cookie}\r\n\r\n`],
        [server.partnerUrl, 'GET /nowhere HTTP/1.1\r\n\r\n'],
        [server.operatorUrl, 'GET /api/operator/v1/partners HTTP/1.1\r\n\r\n'],
      ] as const) {
        const { head, error } = envelopeOf(await raw(request, base));
        assert.match(head, /^HTTP\/1\.1 400 /, request);
        assert.equal(error.code, 'VALIDATION_ERROR');
        assert.deepEqual(fieldErrors(error as { details?: Record<string, unknown> }), [
          { in: 'header', field: 'host', message: 'is required in HTTP/1.1' },
        ]);
      }
      const old = await raw(`GET /api/public/v1/auth/whoami HTTP/1.0\r\nAuthorization: Bearer ${p.live}\r\n\r\n`, server.partnerUrl, false);
      assert.match(old, /^HTTP\/1\.1 200 /);
    });

    test('oversized headers answer 431 in the envelope with a request id', async () => {
      const answer = await raw(`GET /api/public/v1/auth/whoami HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      const { head, error } = envelopeOf(answer);
      assert.match(head, /^HTTP\/1\.1 431 /);
      assert.equal(error.code, 'HEADERS_TOO_LARGE');
    });

    test('Content-Length with Transfer-Encoding answers 400 VALIDATION_ERROR in the envelope, in either order', async () => {
      for (const pair of ['Content-Length: 4\r\nTransfer-Encoding: chunked', 'Transfer-Encoding: chunked\r\nContent-Length: 4']) {
        const answer = await raw(
          `POST /api/public/v1/auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${pair}\r\n\r\n0\r\n\r\n`,
        );
        const { head, error } = envelopeOf(answer);
        assert.match(head, /^HTTP\/1\.1 400 /);
        assert.equal(error.code, 'VALIDATION_ERROR');
        assert.match(error.message, /both Content-Length and Transfer-Encoding/);
      }
    });

    test('two Authorization headers answer 400, whichever comes first', async () => {
      for (const headers of [
        [`Bearer ${p.live}`, 'Bearer nonsense'],
        ['Bearer nonsense', `Bearer ${p.live}`],
      ]) {
        const answer = await raw(
          `GET /api/public/v1/auth/whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headers.map((h) => `Authorization: ${h}\r\n`).join('')}\r\n`,
        );
        const { head, error } = envelopeOf(answer);
        assert.match(head, /^HTTP\/1\.1 400 /);
        assert.equal(error.code, 'VALIDATION_ERROR');
      }
    });

    test('authenticated answers are not cacheable', async () => {
      const whoami = await partnerApi(server, 'GET', '/auth/whoami', { token: p.live });
      assert.equal(whoami.headers.get('cache-control'), 'no-store');
    });

    test('cursors are opaque: they reveal no ids or filters, and any change is refused', async () => {
      for (let i = 0; i < 3; i++) {
        assert.equal(
          (
            await partnerApi(server, 'POST', '/customers/target/users', {
              token: p.live,
              body: { username: `cursorprobe${i}`, email: `cursorprobe${i}@t.example` },
            })
          ).status,
          201,
        );
      }
      const page = await partnerApi<{ pagination: { next_cursor: string } }>(server, 'GET', '/customers/target/users?limit=1', {
        token: p.live,
      });
      const cursor = page.body.pagination.next_cursor;
      const decoded = Buffer.from(cursor, 'base64url').toString('latin1');
      // The cursor is ciphertext: what it must not hold is looked for by texts long enough that random
      // bytes do not hold them by chance (a two-letter username did, once in a few hundred runs).
      assert.doesNotMatch(decoded, /cus_|customer|users|"k"|"l"|owner|cursorprobe/, 'no internal id, list name or sort key readable');
      const next = await partnerApi(server, 'GET', `/customers/target/users?limit=1&cursor=${cursor}`, { token: p.live });
      assert.equal(next.status, 200);
      const tampered = `${cursor.slice(0, 10)}${cursor[10] === 'A' ? 'B' : 'A'}${cursor.slice(11)}`;
      for (const bad of [tampered, `${cursor}=`, `${cursor}A`, cursor.slice(0, -1)]) {
        const refused = await http(
          server.partnerUrl,
          'GET',
          `/api/public/v1/customers/target/users?limit=1&cursor=${encodeURIComponent(bad)}`,
          {
            token: p.live,
          },
        );
        assert.equal(fieldErrors(assertError(refused, 400, 'VALIDATION_ERROR'))[0]?.field, 'cursor');
      }
    });
  });
}
