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
  describe(`GET /auth/whoami [${target.name}]`, () => {
    let server: TestServer;
    const whoami = (token: string) => partnerApi(server, 'GET', '/auth/whoami', { token });

    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    test('the answer: its bytes, headers, one token from the bucket a call, and one access line', async () => {
      const partner = await partnerWithToken(server, 'who-bytes', { settings: { display_name: 'Fäst "Bytes" \u00e9' } });
      const bearer = `Bearer ${partner.token}`;
      const first = await rawGet(server, ['authorization', bearer]);
      // A body's framing header, even an empty one, changes nothing.
      const second = await rawGet(server, ['authorization', bearer, 'content-length', '0']);
      for (const result of [first, second]) {
        assert.equal(result.status, 200, result.text);
        assert.equal(result.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(result.headers['cache-control'], 'no-store');
        assert.equal(Number(result.headers['content-length']), Buffer.byteLength(result.text));
        assert.match(String(result.headers['x-request-id']), /^req_[0-9a-z]{26}$/);
        assert.ok(Number(result.headers['x-ratelimit-limit']) > 0);
      }
      assert.equal(second.text, first.text);
      assert.equal(JSON.parse(first.text).data.partner.display_name, 'Fäst "Bytes" é');
      // Each call took one token from the partner's bucket.
      assert.equal(Number(second.headers['x-ratelimit-remaining']), Number(first.headers['x-ratelimit-remaining']) - 1);

      const line = (result: typeof first) => {
        const found = server.logs.filter((l) => l.request_id === result.headers['x-request-id']);
        assert.equal(found.length, 1, 'one access line');
        const { time, latency_ms, request_id: _id, pid: _pid, hostname: _host, ...rest } = found[0] as Record<string, unknown>;
        assert.equal(typeof time, 'number');
        assert.equal(typeof latency_ms, 'number');
        return rest;
      };
      assert.deepEqual(line(first), line(second));
      assert.deepEqual(line(first), {
        level: 30,
        api: 'partner-api',
        partner: 'who-bytes',
        method: 'GET',
        route: WHOAMI,
        status: 200,
        msg: 'request',
      });
    });

    test('a changed partner row shows in the answer once the partner is read again', async () => {
      const partner = await partnerWithToken(server, 'who-change');
      assert.equal((await whoami(partner.token)).status, 200);
      const changed = await operatorApi(server, 'PATCH', '/partners/who-change', { body: { display_name: 'Renamed' } });
      assert.equal(changed.status, 200, changed.text);
      const after = await whoami(partner.token);
      assert.equal((after.body.data as { partner: { display_name: string } }).partner.display_name, 'Renamed');
    });

    test('refusals carry their reason', async () => {
      const partner = await partnerWithToken(server, 'who-else');
      const bearer = `Bearer ${partner.token}`;

      assertError(await http(server.partnerUrl, 'GET', WHOAMI), 401, 'UNAUTHORIZED');
      assertError(await whoami(`${partner.token.slice(0, -2)}AA`), 401, 'UNAUTHORIZED');
      assertError(await whoami('tnt_at_x'), 401, 'UNAUTHORIZED');
      assertError(await http(server.partnerUrl, 'GET', `${WHOAMI}?verbose=1`, { token: partner.token }), 400, 'VALIDATION_ERROR');
      assertError(await http(server.partnerUrl, 'POST', WHOAMI, { token: partner.token }), 405, 'METHOD_NOT_ALLOWED');

      const repeated = await rawGet(server, ['authorization', bearer, 'authorization', bearer]);
      assert.equal(repeated.status, 400);
      assert.equal(JSON.parse(repeated.text).error.code, 'VALIDATION_ERROR');
      // Header names in any case are still the one header.
      const shouted = await rawGet(server, ['AUTHORIZATION', bearer]);
      assert.equal(shouted.status, 200, shouted.text);

      // A suspension reaches this process at once: 403 with the rate-limit headers.
      assert.equal((await operatorApi(server, 'POST', '/partners/who-else/suspend')).status, 200);
      const suspended = await whoami(partner.token);
      assertError(suspended, 403, 'FORBIDDEN');
      assert.ok(suspended.headers.get('x-ratelimit-remaining'));
      assert.equal((await operatorApi(server, 'POST', '/partners/who-else/unsuspend')).status, 200);
      assert.equal((await whoami(partner.token)).status, 200);

      // An expired token: 401 with the reason.
      server.clock.advance(16 * 60 * 1000);
      const expired = assertError(await whoami(partner.token), 401, 'UNAUTHORIZED');
      assert.match(expired.message, /expired/);
    });

    test("calls count against the partner's rate limit: the burst, then 429", async () => {
      const burst = 12;
      const partner = await partnerWithToken(server, 'who-limit', {
        settings: { limits: { rate_limit_per_minute: 60, rate_limit_burst: burst } },
      });
      let ok = 0;
      let refused: Awaited<ReturnType<typeof whoami>> | undefined;
      for (let i = 0; i < burst + 5 && !refused; i++) {
        const result = await whoami(partner.token);
        if (result.status === 200) ok++;
        else refused = result;
      }
      assert.equal(ok, burst);
      assert.ok(refused);
      const error = assertError(refused, 429, 'RATE_LIMITED');
      assert.equal(refused.headers.get('x-ratelimit-remaining'), '0');
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      assert.ok(error.details);
    });
  });
}
