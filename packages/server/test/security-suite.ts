import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Scope } from '../src/auth/scopes.ts';
import { assertError, createPartner, exchange, issueKey, partnerApi, partnerWithToken } from './client.ts';
import type { TestServer } from './harness.ts';

/**
 * The shared security suite: every authenticated partner route joins it by
 * adding a case. For each route it asserts: no token, a bad token and an
 * expired-looking token answer 401; a token without the route's scope answers
 * 403 FORBIDDEN; and, for routes that read one resource, another partner's and
 * the other mode's tokens answer 404 NOT_FOUND.
 */
export interface SecurityCase {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  /** The scope the route needs; `any` for routes any valid token may call. */
  scope: Scope | 'any';
  body?: unknown;
  /**
   * For routes on one resource: creates it for the given partner token and
   * returns the path that addresses it. The suite then calls that path with
   * another partner's token and with the same partner's other-mode token.
   */
  owned?: (token: string) => Promise<string>;
  /** A test-mode route (CONTRACT §5): its tokens are test-mode ones, and a live token gets 404 whatever its scopes. */
  testMode?: boolean;
}

const ALL_SCOPES: Scope[] = ['customers:read', 'customers:write', 'customers:sso', 'usage:read'];

export function securitySuite(getServer: () => TestServer, cases: SecurityCase[]): void {
  let counter = 0;
  const uniquePartner = (tag: string) => `sec-${tag}-${process.pid % 1000}-${counter++}`;

  for (const route of cases) {
    const name = `${route.method} ${route.path}`;
    const options = (token?: string) => ({ ...(token ? { token } : {}), ...(route.body !== undefined ? { body: route.body } : {}) });

    test(`${name}: no token → 401 UNAUTHORIZED`, async () => {
      assertError(await partnerApi(getServer(), route.method, route.path, options()), 401, 'UNAUTHORIZED');
    });

    test(`${name}: a token this server did not sign → 401 UNAUTHORIZED`, async () => {
      const forged = 'tnt_at_eyJwIjoiYWNtZSJ9.c2lnbmF0dXJlLW5vdC1vdXJz';
      const result = await partnerApi(getServer(), route.method, route.path, options(forged));
      assertError(result, 401, 'UNAUTHORIZED');
      assert.equal(result.headers.get('x-ratelimit-limit'), null, 'no rate-limit headers before authentication');
    });

    if (route.scope !== 'any') {
      test(`${name}: a token without ${route.scope} → 403 FORBIDDEN`, async () => {
        const server = getServer();
        const others = ALL_SCOPES.filter((s) => s !== route.scope);
        const partner = await partnerWithToken(server, uniquePartner('scope'), {
          settings: { scopes: others },
          ...(route.testMode ? { key: { mode: 'test' } } : {}),
        });
        const result = await partnerApi(server, route.method, route.path, options(partner.token));
        const error = assertError(result, 403, 'FORBIDDEN');
        assert.equal(error.details?.required_scope, route.scope);
        assert.ok(result.headers.get('x-ratelimit-limit'), 'an authenticated response carries rate-limit headers');
      });
    }

    if (route.testMode) {
      test(`${name}: a live token, whatever its scopes → 404 NOT_FOUND`, async () => {
        const server = getServer();
        for (const scopes of [ALL_SCOPES, ALL_SCOPES.filter((s) => s !== route.scope)]) {
          const partner = await partnerWithToken(server, uniquePartner('live'), { settings: { scopes } });
          const result = await partnerApi(server, route.method, route.path, options(partner.token));
          assertError(result, 404, 'NOT_FOUND');
          assert.ok(result.headers.get('x-ratelimit-limit'), 'an authenticated response carries rate-limit headers');
        }
      });
    }

    if (route.owned) {
      const owned = route.owned;
      test(`${name}: another partner's resource and the other mode's → 404 NOT_FOUND`, async () => {
        const server = getServer();
        const ownerId = uniquePartner('own');
        await createPartner(server, ownerId);
        const liveToken = (await exchange(server, await issueKey(server, ownerId))).body.access_token;
        const testToken = (await exchange(server, await issueKey(server, ownerId, { mode: 'test' }))).body.access_token;
        const path = await owned(liveToken);
        assert.equal((await partnerApi(server, route.method, path, options(liveToken))).status < 400, true, 'the owner can reach it');
        const stranger = await partnerWithToken(server, uniquePartner('other'));
        assertError(await partnerApi(server, route.method, path, options(stranger.token)), 404, 'NOT_FOUND');
        assertError(await partnerApi(server, route.method, path, options(testToken)), 404, 'NOT_FOUND');
      });
    }
  }
}
