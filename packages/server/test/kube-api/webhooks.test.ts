import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { raw, refusal } from './http.ts';
import { KubeApi } from './index.ts';
import { installKubeDc } from './kube-dc.ts';
import { kubeDcProjectWebhook } from './kube-dc-webhooks.ts';

const PROJECT = { group: 'kube-dc.com', version: 'v1', plural: 'projects' };
const project = (name: string, egressNetworkType: 'public' | 'cloud') => ({
  apiVersion: 'kube-dc.com/v1',
  kind: 'Project',
  metadata: { name },
  spec: { cidrBlock: '10.0.10.0/24', egressNetworkType },
});

/**
 * Validating webhooks on the double: a denial reads as kube-apiserver writes it (ToStatusErr in
 * k8s.io/apiserver/pkg/admission/plugin/webhook/errors/statuserror.go), and Kube-DC's project gate refuses
 * public Projects unless the installation allows them.
 */
describe('validating webhooks on the Kubernetes API double', () => {
  let kube: KubeApi;
  let custom: CustomObjectsApi;
  before(async () => {
    kube = await KubeApi.start();
    installKubeDc(kube);
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'acme' } });
    custom = kube.kubeConfig('system:serviceaccount:acme:tenantry').makeApiClient(CustomObjectsApi);
  });
  after(() => kube.close());
  afterEach(() => {
    for (const name of kube.webhooks.names) kube.webhooks.remove(name);
  });

  test('vproject.kube-dc.com: a public Project is refused at CREATE unless public projects are allowed', async () => {
    kube.webhooks.add(kubeDcProjectWebhook({ allowPublicProjects: false }));
    const denied = await refusal(custom.createNamespacedCustomObject({ ...PROJECT, namespace: 'acme', body: project('www', 'public') }));
    assert.equal(denied.code, 403);
    assert.equal(denied.reason, 'Forbidden');
    assert.match(
      denied.message,
      /^projects\.kube-dc\.com "www" is forbidden: admission webhook "vproject\.kube-dc\.com" denied the request: /,
    );
    assert.deepEqual(denied.details, { name: 'www', group: 'kube-dc.com', kind: 'projects' });
    assert.equal(kube.tryGet('kube-dc.com/v1', 'Project', 'www', 'acme'), undefined);
    await custom.createNamespacedCustomObject({ ...PROJECT, namespace: 'acme', body: project('web', 'cloud') });
    assert.deepEqual(
      kube.webhooks.calls.map((c) => [c.webhook, c.request.operation, c.request.name]),
      [
        ['vproject.kube-dc.com', 'CREATE', 'www'],
        ['vproject.kube-dc.com', 'CREATE', 'web'],
      ],
    );

    kube.webhooks.add(kubeDcProjectWebhook({ allowPublicProjects: true }));
    await custom.createNamespacedCustomObject({ ...PROJECT, namespace: 'acme', body: project('www', 'public') });
    assert.equal((kube.get('kube-dc.com/v1', 'Project', 'www', 'acme').spec as { egressNetworkType: string }).egressNetworkType, 'public');
  });

  test('a webhook\'s own code and reason are kept, a bare denial is "without explanation", and a webhook that cannot be called fails the write', async () => {
    const rules = [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }];
    const core = kube.kubeConfig('dev').makeApiClient(CoreV1Api);
    const create = (name: string) => core.createNamespacedConfigMap({ namespace: 'acme', body: { metadata: { name } } });
    kube.webhooks.add({
      name: 'names.example.com',
      rules,
      handler: (request) =>
        request.name.startsWith('x-') ? { allowed: false, code: 422, reason: 'Invalid', message: 'no x- names' } : true,
    });
    const invalid = await refusal(create('x-1'));
    assert.equal(invalid.code, 422);
    assert.equal(invalid.reason, 'Invalid');
    assert.equal(invalid.message, 'configmaps "x-1" is forbidden: admission webhook "names.example.com" denied the request: no x- names');
    kube.webhooks.remove('names.example.com');

    kube.webhooks.add({ name: 'silent.example.com', rules, handler: () => ({ allowed: false }) });
    assert.equal(
      (await refusal(create('quiet'))).message,
      'configmaps "quiet" is forbidden: admission webhook "silent.example.com" denied the request without explanation',
    );
    kube.webhooks.remove('silent.example.com');

    const down = () => {
      throw new Error('Post "https://webhook.example.svc:443/validate": dial tcp 10.96.0.20:443: connect: connection refused');
    };
    kube.webhooks.add({ name: 'down.example.com', rules, handler: down });
    const failed = await refusal(create('any'));
    assert.equal(failed.code, 500);
    assert.equal(failed.reason, 'InternalError');
    assert.equal(
      failed.message,
      'Internal error occurred: failed calling webhook "down.example.com": Post "https://webhook.example.svc:443/validate": dial tcp 10.96.0.20:443: connect: connection refused',
    );
    kube.webhooks.add({ name: 'down.example.com', rules, handler: down, failurePolicy: 'Ignore' });
    await create('any');
  });

  test('a webhook that admits with warnings answers them as Warning headers', async () => {
    kube.webhooks.add({
      name: 'hints.example.com',
      rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
      handler: () => ({ allowed: true, warnings: ['data.mode is deprecated', 'use data.profile'] }),
    });
    const answer = await raw(kube, 'dev', 'POST', '/api/v1/namespaces/acme/configmaps', { body: { metadata: { name: 'hinted' } } });
    assert.equal(answer.status, 201);
    assert.deepEqual(answer.headers.warning, '299 - "data.mode is deprecated", 299 - "use data.profile"');
  });

  test('rules and selectors: operations, subresources and namespace labels decide which writes a webhook sees', async () => {
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'watched', labels: { webhooks: 'on' } } });
    const seen: string[] = [];
    kube.webhooks.add({
      name: 'audit.example.com',
      rules: [{ apiGroups: [''], apiVersions: ['*'], operations: ['UPDATE', 'DELETE'], resources: ['services/status', 'configmaps'] }],
      namespaceSelector: { matchLabels: { webhooks: 'on' } },
      handler: (request) => {
        seen.push(
          `${request.operation} ${request.type.plural}${request.subresource ? `/${request.subresource}` : ''} ${request.namespace}/${request.name}`,
        );
        return true;
      },
    });
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    for (const namespace of ['watched', 'acme']) {
      await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'cm' } } });
      await core.replaceNamespacedConfigMap({ namespace, name: 'cm', body: { metadata: { name: 'cm' }, data: { a: '1' } } });
      await core.deleteNamespacedConfigMap({ namespace, name: 'cm' });
      await core.createNamespacedService({ namespace, body: { metadata: { name: 'svc' }, spec: { ports: [{ port: 80 }] } } });
      await core.replaceNamespacedServiceStatus({
        namespace,
        name: 'svc',
        body: { metadata: { name: 'svc' }, status: { loadBalancer: {} } },
      });
      await core.replaceNamespacedService({ namespace, name: 'svc', body: { metadata: { name: 'svc' }, spec: { ports: [{ port: 81 }] } } });
    }
    assert.deepEqual(seen, ['UPDATE configmaps watched/cm', 'DELETE configmaps watched/cm', 'UPDATE services/status watched/svc']);
  });
});
