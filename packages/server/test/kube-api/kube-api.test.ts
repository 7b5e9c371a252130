import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApiException, CoreV1Api, CustomObjectsApi, DiscoveryV1Api, PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import { KubeApi } from './index.ts';

/** The double, checked with the real client: what the suites built on it rely on. */
describe('Kubernetes API test double, through @kubernetes/client-node', () => {
  let kube: KubeApi;
  before(async () => {
    kube = await KubeApi.start();
  });
  after(() => kube.close());

  async function failure(promise: Promise<unknown>): Promise<{ code: number; reason: string }> {
    try {
      await promise;
    } catch (error) {
      assert.ok(error instanceof ApiException, `expected an ApiException, got ${String(error)}`);
      // The generated client drops the body of the statuses its OpenAPI document lists (401): only the code is left.
      if (error.body === undefined) return { code: error.code, reason: '' };
      const body = typeof error.body === 'string' ? JSON.parse(error.body) : error.body;
      assert.equal(body.kind, 'Status');
      return { code: error.code, reason: body.reason };
    }
    assert.fail('the call succeeded');
  }

  test('create, get, list by selector, update with resourceVersion, conflict on a stale one, patch, delete', async () => {
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    const created = await core.createNamespacedService({
      namespace: 'default',
      body: { metadata: { name: 'web', labels: { app: 'web' } }, spec: { ports: [{ port: 443 }] } },
    });
    assert.ok(created.metadata?.uid);
    assert.equal(created.spec?.type, 'ClusterIP');
    assert.deepEqual(await failure(core.createNamespacedService({ namespace: 'default', body: { metadata: { name: 'web' } } })), {
      code: 409,
      reason: 'AlreadyExists',
    });
    await core.createNamespacedService({ namespace: 'default', body: { metadata: { name: 'db', labels: { app: 'db' } } } });
    const selected = await core.listNamespacedService({ namespace: 'default', labelSelector: 'app in (web,api)' });
    assert.deepEqual(
      selected.items.map((s) => s.metadata?.name),
      ['web'],
    );
    const byName = await core.listNamespacedService({ namespace: 'default', fieldSelector: 'metadata.name=db' });
    assert.deepEqual(
      byName.items.map((s) => s.metadata?.name),
      ['db'],
    );

    const stale = await core.readNamespacedService({ name: 'web', namespace: 'default' });
    const fresh = await core.replaceNamespacedService({
      name: 'web',
      namespace: 'default',
      body: { ...stale, metadata: { ...stale.metadata, annotations: { a: '1' } } },
    });
    assert.notEqual(fresh.metadata?.resourceVersion, stale.metadata?.resourceVersion);
    assert.deepEqual(
      await failure(
        core.replaceNamespacedService({
          name: 'web',
          namespace: 'default',
          body: { ...stale, metadata: { ...stale.metadata, annotations: { a: '2' } } },
        }),
      ),
      { code: 409, reason: 'Conflict' },
    );

    const merged = await core.patchNamespacedService(
      { name: 'web', namespace: 'default', body: { metadata: { annotations: { b: '2' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    assert.deepEqual(merged.metadata?.annotations, { a: '1', b: '2' });
    const jsonPatched = await core.patchNamespacedService({
      name: 'web',
      namespace: 'default',
      body: [{ op: 'replace', path: '/metadata/annotations/a', value: 'x' }],
    });
    assert.equal(jsonPatched.metadata?.annotations?.a, 'x');
    const strategic = await core.patchNamespacedService(
      { name: 'web', namespace: 'default', body: { spec: { ports: [{ name: 'http', port: 80 }] } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    assert.deepEqual(
      strategic.spec?.ports?.map((p) => p.port),
      [443, 80],
      'a strategic merge patch merges ports by their merge key (port)',
    );

    await core.deleteNamespacedService({ name: 'db', namespace: 'default' });
    assert.deepEqual(await failure(core.readNamespacedService({ name: 'db', namespace: 'default' })), { code: 404, reason: 'NotFound' });
    assert.deepEqual(await failure(core.createNamespacedService({ namespace: 'nowhere', body: { metadata: { name: 'x' } } })), {
      code: 404,
      reason: 'NotFound',
    });
  });

  test('the status subresource, finalizers and garbage collection through ownerReferences', async () => {
    const kc = kube.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const discoveryApi = kc.makeApiClient(DiscoveryV1Api);
    await core.createNode({ body: { metadata: { name: 'cp-1' }, status: { addresses: [{ type: 'InternalIP', address: '10.0.0.1' }] } } });
    const node = await core.readNode({ name: 'cp-1' });
    const ignored = await core.replaceNode({ name: 'cp-1', body: { ...node, status: { addresses: [] } } });
    assert.equal(ignored.status?.addresses?.length, 1, 'the main resource ignores status');
    assert.equal(ignored.metadata?.resourceVersion, node.metadata?.resourceVersion, 'an ignored change is no write');
    const changed = await core.replaceNodeStatus({ name: 'cp-1', body: { ...ignored, status: { addresses: [] } } });
    assert.equal(changed.status?.addresses?.length, 0);

    const owner = await core.createNamespacedService({ namespace: 'default', body: { metadata: { name: 'owner' } } });
    await discoveryApi.createNamespacedEndpointSlice({
      namespace: 'default',
      body: {
        metadata: {
          name: 'owner-mgr',
          finalizers: ['test/hold'],
          ownerReferences: [{ apiVersion: 'v1', kind: 'Service', name: 'owner', uid: owner.metadata?.uid ?? '' }],
        },
        addressType: 'IPv4',
        endpoints: [],
      },
    });
    await core.deleteNamespacedService({ name: 'owner', namespace: 'default' });
    const held = await discoveryApi.readNamespacedEndpointSlice({ name: 'owner-mgr', namespace: 'default' });
    assert.ok(held.metadata?.deletionTimestamp, 'collected, but held by its finalizer');
    await discoveryApi.patchNamespacedEndpointSlice(
      { name: 'owner-mgr', namespace: 'default', body: { metadata: { finalizers: null } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    assert.deepEqual(await failure(discoveryApi.readNamespacedEndpointSlice({ name: 'owner-mgr', namespace: 'default' })), {
      code: 404,
      reason: 'NotFound',
    });
  });

  test('custom resources, registered or defined by a CustomResourceDefinition', async () => {
    kube.registerResource({
      group: 'kube-dc.com',
      version: 'v1',
      kind: 'Organization',
      plural: 'organizations',
      namespaced: true,
      statusSubresource: true,
    });
    const custom = kube.kubeConfig().makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: 'kube-dc.com',
      version: 'v1',
      namespace: 'default',
      plural: 'organizations',
      body: { apiVersion: 'kube-dc.com/v1', kind: 'Organization', metadata: { name: 'globex' }, spec: { email: 'a@b.c' } },
    });
    kube.patch('kube-dc.com/v1', 'Organization', 'globex', 'default', { status: { ready: true } }, 'status');
    const read = (await custom.getNamespacedCustomObject({
      group: 'kube-dc.com',
      version: 'v1',
      namespace: 'default',
      plural: 'organizations',
      name: 'globex',
    })) as {
      status?: { ready?: boolean };
      metadata: { generation: number };
    };
    assert.equal(read.status?.ready, true);
    assert.equal(read.metadata.generation, 1, 'a status change does not bump the generation');

    kube.create({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'projects.kube-dc.com' },
      spec: {
        group: 'kube-dc.com',
        scope: 'Namespaced',
        names: { kind: 'Project', plural: 'projects' },
        versions: [{ name: 'v1', served: true }],
      },
    });
    await custom.createNamespacedCustomObject({
      group: 'kube-dc.com',
      version: 'v1',
      namespace: 'default',
      plural: 'projects',
      body: { apiVersion: 'kube-dc.com/v1', kind: 'Project', metadata: { name: 'p1' } },
    });
    assert.equal(kube.list('kube-dc.com/v1', 'Project', 'default').length, 1);
  });

  test('injected faults: a failing request, a forced conflict', async () => {
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    kube.faults.failNext({ status: 503, match: (r) => r.resource === 'nodes' && r.verb === 'list' });
    assert.deepEqual(await failure(core.listNode()), { code: 503, reason: 'ServiceUnavailable' });
    assert.ok((await core.listNode()).items.length > 0, 'only the next one fails');
    kube.faults.conflictNextWrite((r) => r.resource === 'configmaps');
    assert.deepEqual(await failure(core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'c' } } })), {
      code: 409,
      reason: 'Conflict',
    });
  });

  test('watch: events in order, resume after a drop from the last version seen, 410 for a compacted one', async () => {
    const kc = kube.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const seen: string[] = [];
    let lastVersion = '';
    let ended: unknown = 'open';
    const watch = new Watch(kc);
    const listed = await core.listNamespacedConfigMap({ namespace: 'default', labelSelector: 'w=1' });
    await watch.watch(
      '/api/v1/namespaces/default/configmaps',
      { labelSelector: 'w=1', resourceVersion: listed.metadata?.resourceVersion },
      (type, object) => {
        seen.push(`${type} ${object.metadata.name}`);
        lastVersion = object.metadata.resourceVersion;
      },
      (error) => {
        ended = error;
      },
    );
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'w1', labels: { w: '1' } } } });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'other' } } });
    await core.patchNamespacedConfigMap(
      { name: 'w1', namespace: 'default', body: { metadata: { labels: { w: '2' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await waitFor(() => seen.length === 2);
    assert.deepEqual(seen, ['ADDED w1', 'DELETED w1'], 'leaving the selector is a DELETED event');

    assert.equal(kube.dropWatches(), 1);
    await waitFor(() => ended !== 'open');
    // Written while no watch was open: a resumed watch must still see them.
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'w2', labels: { w: '1' } } } });
    await core.deleteNamespacedConfigMap({ name: 'w2', namespace: 'default' });
    await watch.watch(
      '/api/v1/namespaces/default/configmaps',
      { labelSelector: 'w=1', resourceVersion: lastVersion },
      (type, object) => {
        seen.push(`${type} ${object.metadata.name}`);
      },
      () => undefined,
    );
    await waitFor(() => seen.length === 4);
    assert.deepEqual(seen.slice(2), ['ADDED w2', 'DELETED w2']);

    kube.compact();
    const events: Array<{ type: string; code?: number }> = [];
    await watch.watch(
      '/api/v1/namespaces/default/configmaps',
      { resourceVersion: lastVersion },
      (type, object) => {
        events.push({ type, code: object.code });
      },
      () => undefined,
    );
    await waitFor(() => events.length === 1);
    assert.deepEqual(events, [{ type: 'ERROR', code: 410 }]);
    kube.dropWatches();
  });

  test('an unknown token is 401', async () => {
    const kc = kube.kubeConfig();
    const user = kc.getCurrentUser();
    if (user) (user as { token?: string }).token = 'nope';
    assert.deepEqual(await failure(kc.makeApiClient(CoreV1Api).listNode()), { code: 401, reason: '' });
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) assert.fail('the condition did not become true in time');
    await new Promise((ok) => setTimeout(ok, 10));
  }
}
