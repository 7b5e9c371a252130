import { after, before, describe } from 'node:test';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { securitySuite } from '../../test/security-suite.ts';

/** The webhook and events routes in the shared security suite: 401 without a valid token, 403 without the scope. */
for (const target of testDatabases()) {
  describe(`webhook and event routes: shared security suite [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    securitySuite(
      () => server,
      [
        { method: 'PUT', path: '/webhook', scope: 'customers:write', body: { url: 'https://8.8.8.8/hooks' } },
        { method: 'GET', path: '/webhook', scope: 'customers:read' },
        { method: 'DELETE', path: '/webhook', scope: 'customers:write' },
        { method: 'POST', path: '/webhook/secret', scope: 'customers:write' },
        { method: 'POST', path: '/webhook/test', scope: 'customers:write' },
        { method: 'GET', path: '/webhook/deliveries', scope: 'customers:read' },
        { method: 'GET', path: '/events', scope: 'customers:read' },
        { method: 'GET', path: '/events/stream', scope: 'customers:read' },
      ],
    );
  });
}
