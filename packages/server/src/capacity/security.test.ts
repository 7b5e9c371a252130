import { after, before, describe } from 'node:test';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer } from '../../test/provisioning.ts';
import { securitySuite } from '../../test/security-suite.ts';

/**
 * The capacity and usage routes in the shared security suite: 401 without a valid token, 403 without the
 * scope, and 404 for another partner's customer or the other mode's.
 */
for (const target of testDatabases()) {
  describe(`capacity and usage routes: shared security suite [${target.name}]`, () => {
    let server: TestServer;
    let n = 0;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    /** A fresh active customer of the token's partner; the path addresses it. */
    const customer = (suffix: string) => async (token: string) => {
      const id = `sec-cap-${n++}`;
      await activeCustomer(server, token, id);
      return `/customers/${id}${suffix}`;
    };
    const quota = { revision: 1, quota: { vcpu: 2, memory_gib: 8, storage_gib: 50, gpus: {} } };

    securitySuite(
      () => server,
      [
        { method: 'GET', path: '/catalog/plans', scope: 'customers:read' },
        { method: 'GET', path: '/capacity', scope: 'customers:read' },
        { method: 'GET', path: '/customers/nobody/quota', scope: 'customers:read', owned: customer('/quota') },
        { method: 'PUT', path: '/customers/nobody/quota', scope: 'customers:write', body: quota, owned: customer('/quota') },
        { method: 'GET', path: '/customers/nobody/plan', scope: 'customers:read', owned: customer('/plan') },
        { method: 'PUT', path: '/customers/nobody/plan', scope: 'customers:write', body: { plan_id: 'starter' }, owned: customer('/plan') },
        { method: 'GET', path: '/usage', scope: 'usage:read' },
        { method: 'GET', path: '/customers/nobody/usage', scope: 'usage:read', owned: customer('/usage') },
      ],
    );
  });
}
