import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { assertError, http, operatorApi, PARTNER_API, partnerApi, partnerWithToken } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';

const WHOAMI = `${PARTNER_API}/auth/whoami`;

/** A GET of whoami with exactly these header lines (fetch would join repeated ones, and adds its own). */
function rawGet(server: TestServer, headers: string[]): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const url = new URL(`${server.partnerUrl}${WHOAMI}`);
  return new Promise((resolve, reject) => {
    httpRequest(url, { headers: ['host', url.host, ...headers] }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, text }));
    })
      .on('error', reject)
      .end();
  });
}

for (const target of testDatabases()) {
  describe(`GET /auth/whoami answered from memory [${target.name}]`, () => {
    let server: TestServer;
    /** Requests the route (the framework's authentication) saw since the last reset. */
    let routeCalls = 0;
    const whoami = (token: string) => partnerApi(server, 'GET', '/auth/whoami', { token });
    /**
     * Asks until one answer came from memory, and returns it (PostgreSQL's buckets lend this process
     * tokens only once a partner is busy: until then the route answers).
     */
    const fromMemory = async (token: string) => {
      for (let i = 0; i < 40; i++) {
        const before = routeCalls;
        const result = await rawGet(server, ['authorization', `Bearer ${token}`]);
        assert.equal(result.status, 200, result.text);
        if (routeCalls === before) return result;
      }
      assert.fail('no whoami was answered from memory in 40 calls');
    };

    before(async () => {
      server = await startTestServer(target);
      const original = server.services.auth.authenticate.bind(server.services.auth);
      server.services.auth.authenticate = (...args) => {
        routeCalls++;
        return original(...args);
      };
    });
    after(() => server.stop());

    test("the route's bytes, headers and log line, with no framework authentication", async () => {
      const partner = await partnerWithToken(server, 'fast-bytes', { settings: { display_name: 'Fäst "Bytes" \u00e9' } });
      const fast = await fromMemory(partner.token);
      const bearer = `Bearer ${partner.token}`;
      // A body's framing header, even an empty one, leaves the request to the framework: the route answers.
      const before = routeCalls;
      const routed = await rawGet(server, ['authorization', bearer, 'content-length', '0']);
      assert.equal(routeCalls, before + 1, 'answered by the route');
      assert.equal(routed.status, 200, routed.text);

      assert.equal(fast.text, routed.text);
      assert.equal(JSON.parse(fast.text).data.partner.display_name, 'Fäst "Bytes" é');
      for (const header of ['content-type', 'content-length', 'cache-control', 'x-ratelimit-limit']) {
        assert.equal(fast.headers[header], routed.headers[header], header);
      }
      assert.equal(fast.headers['cache-control'], 'no-store');
      assert.match(String(fast.headers['x-request-id']), /^req_[0-9a-z]{26}$/);
      // Both took one token from the partner's bucket.
      assert.equal(Number(routed.headers['x-ratelimit-remaining']), Number(fast.headers['x-ratelimit-remaining']) - 1);

      const line = (result: typeof fast) => {
        const found = server.logs.find((l) => l.request_id === result.headers['x-request-id']);
        assert.ok(found, 'one access line');
        const { time: _time, latency_ms, request_id: _id, ...rest } = found;
        assert.equal(typeof latency_ms, 'number');
        return rest;
      };
      assert.deepEqual(line(fast), line(routed));
      assert.deepEqual((({ api, partner, method, route, status, msg }) => ({ api, partner, method, route, status, msg }))(line(fast)), {
        api: 'partner-api',
        partner: 'fast-bytes',
        method: 'GET',
        route: WHOAMI,
        status: 200,
        msg: 'request',
      });
    });

    test('a changed partner row shows in the answer once the partner is read again', async () => {
      const partner = await partnerWithToken(server, 'fast-change');
      await fromMemory(partner.token);
      const changed = await operatorApi(server, 'PATCH', '/partners/fast-change', { body: { display_name: 'Renamed' } });
      assert.equal(changed.status, 200, changed.text);
      const after = await whoami(partner.token);
      assert.equal((after.body.data as { partner: { display_name: string } }).partner.display_name, 'Renamed');
    });

    test('everything else is left to the route, which answers with the reason', async () => {
      const partner = await partnerWithToken(server, 'fast-else');
      await fromMemory(partner.token);
      const bearer = `Bearer ${partner.token}`;

      assertError(await http(server.partnerUrl, 'GET', WHOAMI), 401, 'UNAUTHORIZED');
      assertError(await whoami(`${partner.token.slice(0, -2)}AA`), 401, 'UNAUTHORIZED');
      assertError(await whoami('tnt_at_x'), 401, 'UNAUTHORIZED');
      assertError(await http(server.partnerUrl, 'GET', `${WHOAMI}?verbose=1`, { token: partner.token }), 400, 'VALIDATION_ERROR');
      assertError(await http(server.partnerUrl, 'POST', WHOAMI, { token: partner.token }), 405, 'METHOD_NOT_ALLOWED');

      const repeated = await rawGet(server, ['authorization', bearer, 'authorization', bearer]);
      assert.equal(repeated.status, 400);
      assert.equal(JSON.parse(repeated.text).error.code, 'VALIDATION_ERROR');
      // Header names in any case are still the one header, answered from memory.
      const before = routeCalls;
      const shouted = await rawGet(server, ['AUTHORIZATION', bearer]);
      assert.equal(shouted.status, 200, shouted.text);
      assert.equal(routeCalls, before);

      // A suspension reaches this process at once: 403 with the rate-limit headers, from the route.
      assert.equal((await operatorApi(server, 'POST', '/partners/fast-else/suspend')).status, 200);
      const suspended = await whoami(partner.token);
      assertError(suspended, 403, 'FORBIDDEN');
      assert.ok(suspended.headers.get('x-ratelimit-remaining'));
      assert.equal((await operatorApi(server, 'POST', '/partners/fast-else/unsuspend')).status, 200);
      await fromMemory(partner.token);

      // An expired token: 401 with the reason.
      server.clock.advance(16 * 60 * 1000);
      const expired = assertError(await whoami(partner.token), 401, 'UNAUTHORIZED');
      assert.match(expired.message, /expired/);
    });

    test("answers from memory count against the partner's rate limit: the burst, then 429 from the route", async () => {
      const burst = 12;
      const partner = await partnerWithToken(server, 'fast-limit', {
        settings: { limits: { rate_limit_per_minute: 60, rate_limit_burst: burst } },
      });
      let ok = 0;
      let refused: Awaited<ReturnType<typeof whoami>> | undefined;
      const before = routeCalls;
      for (let i = 0; i < burst + 5 && !refused; i++) {
        const result = await whoami(partner.token);
        if (result.status === 200) ok++;
        else refused = result;
      }
      assert.ok(routeCalls - before < ok, 'some were answered from memory');
      assert.equal(ok, burst);
      assert.ok(refused);
      const error = assertError(refused, 429, 'RATE_LIMITED');
      assert.equal(refused.headers.get('x-ratelimit-remaining'), '0');
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      assert.ok(error.details);
    });
  });
}
