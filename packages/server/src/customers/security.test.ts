import { after, before, describe } from 'node:test';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer } from '../../test/provisioning.ts';
import { securitySuite } from '../../test/security-suite.ts';

/**
 * Every customer, project, user, operation and console-login route in the
 * shared security suite: 401 without a valid token, 403 without its scope,
 * 404 for another partner's or the other mode's resource.
 */
let counter = 0;
const unique = (prefix: string) => `${prefix}-${process.pid % 1000}-${counter++}`;

for (const target of testDatabases()) {
  describe(`customer routes: shared security suite [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    const owned = (suffix: string) => async (token: string) => {
      const id = unique('sec');
      await activeCustomer(server, token, id, { owner: { username: 'owner', email: `owner@${id}.example` } });
      return `/customers/${id}${suffix}`;
    };

    securitySuite(
      () => server,
      [
        { method: 'POST', path: '/customers', scope: 'customers:write', body: { id: 'x', owner: { username: 'o', email: 'o@x.example' } } },
        { method: 'GET', path: '/customers', scope: 'customers:read' },
        { method: 'GET', path: '/customers/{id}', scope: 'customers:read', owned: owned('') },
        { method: 'POST', path: '/customers/{id}/suspend', scope: 'customers:write', owned: owned('/suspend') },
        { method: 'POST', path: '/customers/{id}/resume', scope: 'customers:write', owned: owned('/resume') },
        { method: 'DELETE', path: '/customers/{id}', scope: 'customers:write', owned: owned('') },
        { method: 'GET', path: '/customers/{id}/projects', scope: 'customers:read', owned: owned('/projects') },
        { method: 'POST', path: '/customers/{id}/projects', scope: 'customers:write', body: { name: 'p2' }, owned: owned('/projects') },
        { method: 'GET', path: '/customers/{id}/projects/default', scope: 'customers:read', owned: owned('/projects/default') },
        { method: 'DELETE', path: '/customers/{id}/projects/default', scope: 'customers:write', owned: owned('/projects/default') },
        { method: 'GET', path: '/customers/{id}/operations', scope: 'customers:read', owned: owned('/operations') },
        { method: 'GET', path: '/customers/{id}/users', scope: 'customers:read', owned: owned('/users') },
        { method: 'GET', path: '/customers/{id}/users/owner', scope: 'customers:read', owned: owned('/users/owner') },
        {
          method: 'POST',
          path: '/customers/{id}/users',
          scope: 'customers:write',
          body: { username: 'new', email: `new-${process.pid}@sec.example` },
          owned: owned('/users'),
        },
        {
          method: 'POST',
          path: '/customers/{id}/users/owner/console-login',
          scope: 'customers:sso',
          owned: owned('/users/owner/console-login'),
        },
        { method: 'POST', path: '/test-helpers/clock/advance', scope: 'customers:write', body: { seconds: 1 }, testMode: true },
        { method: 'POST', path: '/test-helpers/clock/reset', scope: 'customers:write', testMode: true },
      ],
    );
  });
}
