import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, createCustomer } from '../../test/provisioning.ts';
import { securitySuite } from '../../test/security-suite.ts';

/**
 * Every authenticated route of the partner API in the shared security suite: 401 without a valid
 * token, 403 without its scope, 404 for another partner's or the other mode's resource, 404 for a
 * live token on a test-mode route. The suite reads the routes the server registered and fails when
 * one that needs a token has no case here: a new route joins by adding its case.
 */
let counter = 0;
const unique = (prefix: string) => `${prefix}-${process.pid % 1000}-${counter++}`;

for (const target of testDatabases()) {
  describe(`partner API: shared security suite [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    /** A fresh active customer of the token's partner, with its owner `owner`. */
    const customer = async (token: string) => {
      const id = unique('sec');
      await activeCustomer(server, token, id, { owner: { username: 'owner', email: `owner@${id}.example` } });
      return id;
    };
    /** The path `prefix/customers/{a fresh customer}suffix`. */
    const owned =
      (suffix: string, prefix = '') =>
      async (token: string) =>
        `${prefix}/customers/${await customer(token)}${suffix}`;
    const operation = async (token: string) => {
      const id = unique('sec');
      const created = await createCustomer(server, token, id);
      return `/customers/${id}/operations/${created.operation.id}`;
    };
    const secondUser = async (token: string) => {
      const id = await customer(token);
      const body = { username: 'second', email: `second@${id}.example` };
      const created = await partnerApi(server, 'POST', `/customers/${id}/users`, { token, body });
      assert.equal(created.status, 201, created.text);
      return `/customers/${id}/users/second`;
    };
    const quota = { revision: 1, quota: { vcpu: 2, memory_gib: 8, storage_gib: 50, gpus: {} } };

    securitySuite(
      () => server,
      [
        { method: 'GET', path: '/auth/whoami', scope: 'any' },
        // Customers.
        { method: 'POST', path: '/customers', scope: 'customers:write', body: { id: 'x', owner: { username: 'o', email: 'o@x.example' } } },
        { method: 'GET', path: '/customers', scope: 'customers:read' },
        { method: 'GET', path: '/customers/{id}', scope: 'customers:read', owned: owned('') },
        { method: 'POST', path: '/customers/{id}/suspend', scope: 'customers:write', owned: owned('/suspend') },
        { method: 'POST', path: '/customers/{id}/resume', scope: 'customers:write', owned: owned('/resume') },
        { method: 'DELETE', path: '/customers/{id}', scope: 'customers:write', owned: owned('') },
        // Projects.
        { method: 'GET', path: '/customers/{id}/projects', scope: 'customers:read', owned: owned('/projects') },
        { method: 'POST', path: '/customers/{id}/projects', scope: 'customers:write', body: { name: 'p2' }, owned: owned('/projects') },
        { method: 'GET', path: '/customers/{id}/projects/default', scope: 'customers:read', owned: owned('/projects/default') },
        { method: 'DELETE', path: '/customers/{id}/projects/default', scope: 'customers:write', owned: owned('/projects/default') },
        // Operations.
        { method: 'GET', path: '/customers/{id}/operations', scope: 'customers:read', owned: owned('/operations') },
        { method: 'GET', path: '/customers/{id}/operations/{operation_id}', scope: 'customers:read', owned: operation },
        // Users.
        { method: 'GET', path: '/customers/{id}/users', scope: 'customers:read', owned: owned('/users') },
        { method: 'GET', path: '/customers/{id}/users/owner', scope: 'customers:read', owned: owned('/users/owner') },
        {
          method: 'POST',
          path: '/customers/{id}/users',
          scope: 'customers:write',
          body: { username: 'new', email: `new-${process.pid}@sec.example` },
          owned: owned('/users'),
        },
        { method: 'DELETE', path: '/customers/{id}/users/{username}', scope: 'customers:write', owned: secondUser },
        {
          method: 'POST',
          path: '/customers/{id}/users/owner/console-login',
          scope: 'customers:sso',
          owned: owned('/users/owner/console-login'),
        },
        // Capacity and usage.
        { method: 'GET', path: '/catalog/plans', scope: 'customers:read' },
        { method: 'GET', path: '/capacity', scope: 'customers:read' },
        { method: 'GET', path: '/customers/{id}/quota', scope: 'customers:read', owned: owned('/quota') },
        { method: 'PUT', path: '/customers/{id}/quota', scope: 'customers:write', body: quota, owned: owned('/quota') },
        { method: 'GET', path: '/customers/{id}/plan', scope: 'customers:read', owned: owned('/plan') },
        { method: 'PUT', path: '/customers/{id}/plan', scope: 'customers:write', body: { plan_id: 'starter' }, owned: owned('/plan') },
        { method: 'GET', path: '/usage', scope: 'usage:read' },
        { method: 'GET', path: '/customers/{id}/usage', scope: 'usage:read', owned: owned('/usage') },
        // Webhooks and events.
        { method: 'PUT', path: '/webhook', scope: 'customers:write', body: { url: 'https://8.8.8.8/hooks' } },
        { method: 'GET', path: '/webhook', scope: 'customers:read' },
        { method: 'DELETE', path: '/webhook', scope: 'customers:write' },
        { method: 'POST', path: '/webhook/secret', scope: 'customers:write' },
        { method: 'POST', path: '/webhook/test', scope: 'customers:write' },
        { method: 'GET', path: '/webhook/deliveries', scope: 'customers:read' },
        { method: 'GET', path: '/events', scope: 'customers:read' },
        { method: 'GET', path: '/events/stream', scope: 'customers:read' },
        // Test helpers: test-mode tokens only.
        { method: 'POST', path: '/test-helpers/failures', scope: 'customers:write', body: { type: 'customer.create' }, testMode: true },
        {
          method: 'PUT',
          path: '/test-helpers/customers/{id}/workloads',
          scope: 'customers:write',
          body: { vms: ['vm-1'] },
          testMode: true,
          owned: owned('/workloads', '/test-helpers'),
        },
        {
          method: 'PUT',
          path: '/test-helpers/customers/{id}/users/owner/required-actions',
          scope: 'customers:write',
          body: { actions: ['UPDATE_PASSWORD'] },
          testMode: true,
          owned: owned('/users/owner/required-actions', '/test-helpers'),
        },
        { method: 'POST', path: '/test-helpers/clock/advance', scope: 'customers:write', body: { seconds: 1 }, testMode: true },
        { method: 'POST', path: '/test-helpers/clock/reset', scope: 'customers:write', testMode: true },
      ],
      { everyRoute: true },
    );
  });
}
