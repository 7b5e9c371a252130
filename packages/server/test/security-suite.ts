import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PartnerRoute } from '../src/app/partner-app.ts';
import { PARTNER_API_PREFIX } from '../src/app/partner-app.ts';
import type { Scope } from '../src/partners/scopes.ts';
import { assertError, createPartner, exchange, issueKey, partnerApi, partnerWithToken } from './client.ts';
import type { TestServer } from './harness.ts';

/**
 * The shared security suite: every authenticated partner route joins it by
 * adding a case. For each route it asserts: no token and a token this server
 * did not sign answer 401; a token without the route's scope answers
 * 403 FORBIDDEN; and, for routes on one resource, another partner's and
 * the other mode's tokens answer 404 NOT_FOUND.
 */
export interface SecurityCase {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  /** The scope the route needs; `any` for routes any valid token may call. */
  scope: Scope | 'any';
  body?: unknown;
  /**
   * For routes on one resource: creates it for the given partner token (a
   * test-mode one for test-mode routes) and returns the path that addresses it.
   * The suite calls that path with another partner's token and with the same
   * partner's other-mode token, then with the owner's.
   */
  owned?: (token: string) => Promise<string>;
  /** A test-mode route (CONTRACT §5): its tokens are test-mode ones, and a live token gets 404 whatever its scopes. */
  testMode?: boolean;
}

const ALL_SCOPES: Scope[] = ['customers:read', 'customers:write', 'customers:sso', 'usage:read'];

interface SecuritySuiteOptions {
  /**
   * The server's whole partner API: a test fails when a route that needs a token has no case here,
   * or a case names a route the server does not have, so a new route cannot be left out.
   */
  everyRoute?: boolean;
}

export function securitySuite(getServer: () => TestServer, cases: SecurityCase[], options: SecuritySuiteOptions = {}): void {
  if (options.everyRoute) {
    test('every partner route that needs a token has a case, with its scope and mode', () => {
      assert.deepEqual(uncovered(getServer().partnerRoutes(), cases), []);
    });
  }

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
        const [ownerToken, otherModeToken] = route.testMode ? [testToken, liveToken] : [liveToken, testToken];
        const path = await owned(ownerToken);
        const stranger = await partnerWithToken(server, uniquePartner('other'), route.testMode ? { key: { mode: 'test' } } : {});
        assertError(await partnerApi(server, route.method, path, options(stranger.token)), 404, 'NOT_FOUND');
        assertError(await partnerApi(server, route.method, path, options(otherModeToken)), 404, 'NOT_FOUND');
        // Last, so the 404s above were not for something already gone, and the strangers' calls changed nothing the owner needs.
        const own = await partnerApi(server, route.method, path, options(ownerToken));
        assert.ok(own.status < 400, `the owner can reach it: ${own.status} ${own.text}`);
      });
    }
  }
}

/**
 * What `cases` misses of `routes`: each authenticated route without a case, and each case without a
 * route. A case's path names a route when it fits the route's pattern (a parameter stands for one
 * segment, `{id}` or a real value); a fixed segment wins over a parameter, as in the router.
 */
function uncovered(routes: readonly PartnerRoute[], cases: readonly SecurityCase[]): string[] {
  const patterns = routes.map((route) => {
    const path = route.url.slice(PARTNER_API_PREFIX.length);
    const params = path.split('/').filter((segment) => segment.startsWith(':')).length;
    // Route paths are letters, digits, '-', '_' and '/' besides parameters: nothing else to escape.
    const regex = new RegExp(`^${path.replace(/:[A-Za-z_]+/g, '[^/]+')}$`);
    return { route, path, params, regex };
  });
  const covered = new Set<string>();
  const problems: string[] = [];
  for (const c of cases) {
    const path = c.path.split('?')[0] ?? '';
    const match = patterns.filter((p) => p.route.method === c.method && p.regex.test(path)).sort((a, b) => a.params - b.params)[0];
    if (!match) {
      problems.push(`${c.method} ${c.path}: a case for no registered route`);
      continue;
    }
    covered.add(`${c.method} ${match.path}`);
    if (match.route.scope !== c.scope) problems.push(`${c.method} ${match.path}: needs ${match.route.scope}, the case says ${c.scope}`);
    const testMode = match.path.startsWith('/test-helpers/');
    if ((c.testMode ?? false) !== testMode) problems.push(`${c.method} ${match.path}: testMode should be ${testMode}`);
  }
  for (const p of patterns) {
    if (p.route.scope !== undefined && !covered.has(`${p.route.method} ${p.path}`)) {
      problems.push(`${p.route.method} ${p.path}: needs a token and has no case in the security suite`);
    }
  }
  return problems;
}
