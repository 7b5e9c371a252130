import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { insideTransaction } from '../../../test/in-transaction.ts';
import { NetworkCallInTransactionError } from '../../infra/db/transactions.ts';
import type { KubernetesPlatformConfig } from './config.ts';
import type { Driver } from './driver.ts';
import { KeycloakAdmin } from './keycloak.ts';
import { KINDS, KubeClient } from './kube.ts';
import { usage } from './usage.ts';

/**
 * Each outbound client of the kubernetes driver refuses a call made with a database transaction open, before
 * anything reaches the network; the same call made after the transaction does reach it. One local server
 * stands in for the cluster, the identity provider and Prometheus, and counts what it is asked.
 */
describe('the kubernetes driver never calls out with a database transaction open', () => {
  let server: Server;
  let base: string;
  const requests: string[] = [];
  before(async () => {
    server = createServer((request, response) => {
      requests.push(`${request.method} ${request.url}`);
      response.setHeader('content-type', 'application/json');
      const url = request.url ?? '';
      if (url.includes('/protocol/openid-connect/token')) response.end(JSON.stringify({ access_token: 't', expires_in: 300 }));
      else if (url.startsWith('/admin/')) response.end('[]');
      else if (url.startsWith('/api/v1/query')) response.end(JSON.stringify({ status: 'success', data: { result: [] } }));
      else {
        response.statusCode = 404;
        response.end(JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 }));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const refused = (what: string) => (error: unknown) =>
    error instanceof NetworkCallInTransactionError && error.message.includes(`${what} was called with a database transaction open`);

  test('the Kubernetes client', async () => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: base, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const kube = new KubeClient(kubeConfig);
    requests.length = 0;
    await assert.rejects(
      insideTransaction(() => kube.get(KINDS.namespace, 'org-a')),
      refused('KubeClient'),
    );
    assert.deepEqual(requests, []);
    assert.equal(await kube.get(KINDS.namespace, 'org-a'), undefined);
    assert.equal(requests.length, 1);
  });

  test('the Keycloak admin client', async () => {
    const idp = new KeycloakAdmin({
      url: base,
      adminRealm: 'master',
      clientId: 'tenantry',
      clientSecret: 's',
      login: 'console',
      loginClientId: 'kube-dc',
      loginRedirectUrl: undefined,
    });
    requests.length = 0;
    await assert.rejects(
      insideTransaction(() => idp.findUser('org-a', 'alice')),
      refused('KeycloakAdmin'),
    );
    assert.deepEqual(requests, []);
    assert.equal(await idp.findUser('org-a', 'alice'), undefined);
    assert.equal(requests.length, 2, 'a token, then the lookup');
  });

  test('the Prometheus client', async () => {
    const config = { metricsUrl: base, gpuProfiles: {} } as unknown as KubernetesPlatformConfig;
    const driver = { config, logger: pino({ level: 'silent' }) } as Driver;
    const ctx = { partnerId: 'p', mode: 'live' as const, now: new Date() };
    const to = new Date();
    const subject = { customerId: 'c', organization: 'org-a', since: new Date(to.getTime() - 3_600_000), until: null };
    const from = subject.since;
    requests.length = 0;
    await assert.rejects(
      insideTransaction(() => usage(driver, ctx, [subject], from, to)),
      refused('Prometheus'),
    );
    assert.deepEqual(requests, []);
    assert.ok(await usage(driver, ctx, [subject], from, to));
    assert.ok(requests.length > 0);
  });
});
