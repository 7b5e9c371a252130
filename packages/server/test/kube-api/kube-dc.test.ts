import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApiException, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { KubeApi } from './index.ts';
import { KubeDcController } from './kube-dc-controller.ts';

const ORG = { group: 'kube-dc.com', version: 'v1', plural: 'organizations' };
const PROJECT = { group: 'kube-dc.com', version: 'v1', plural: 'projects' };

/** The Kube-DC part of the double, through the real client: CRDs, the controller double, namespace termination. */
describe('Kube-DC on the Kubernetes API double', () => {
  let kube: KubeApi;
  let controller: KubeDcController;
  before(async () => {
    kube = await KubeApi.start();
    controller = new KubeDcController(kube, { running: false });
  });
  after(async () => {
    controller.close();
    await kube.close();
  });

  test('Organization and Project move as Kube-DC moves them, and deletion finalizes in order', async () => {
    const custom = kube.kubeConfig().makeApiClient(CustomObjectsApi);
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: 'acme' } } });
    await custom.createNamespacedCustomObject({
      ...ORG,
      namespace: 'acme',
      body: { apiVersion: 'kube-dc.com/v1', kind: 'Organization', metadata: { name: 'acme' }, spec: { email: 'ops@acme.example' } },
    });
    await custom.createNamespacedCustomObject({
      ...PROJECT,
      namespace: 'acme',
      body: {
        apiVersion: 'kube-dc.com/v1',
        kind: 'Project',
        metadata: { name: 'web' },
        spec: { cidrBlock: '10.0.0.0/24', egressNetworkType: 'cloud' },
      },
    });
    // Nothing moves until the controller runs: the client sees the in-between state.
    const fresh = await custom.getNamespacedCustomObject({ ...ORG, namespace: 'acme', name: 'acme' });
    assert.equal(fresh.status, undefined);
    controller.step();
    const org = await custom.getNamespacedCustomObject({ ...ORG, namespace: 'acme', name: 'acme' });
    assert.equal(org.status.ready, true);
    assert.equal(org.status.conditions[0].type, 'Ready');
    assert.deepEqual(org.metadata.finalizers, ['kube-dc.com/organization']);
    const project = await custom.getNamespacedCustomObject({ ...PROJECT, namespace: 'acme', name: 'web' });
    assert.equal(project.status.ready, true);
    assert.equal(project.status.namespace, 'acme-web');
    assert.ok(await core.readNamespace({ name: 'acme-web' }));

    // The Organization waits for its Projects; a Project for its backing namespace.
    await custom.deleteNamespacedCustomObject({ ...ORG, namespace: 'acme', name: 'acme' });
    controller.step();
    const waiting = await custom.getNamespacedCustomObject({ ...ORG, namespace: 'acme', name: 'acme' });
    assert.equal(waiting.status.conditions[0].reason, 'Deleting');
    await custom.deleteNamespacedCustomObject({ ...PROJECT, namespace: 'acme', name: 'web' });
    controller.step();
    const gone = async (promise: Promise<unknown>) => {
      try {
        await promise;
        return false;
      } catch (error) {
        return error instanceof ApiException && error.code === 404;
      }
    };
    assert.ok(await gone(custom.getNamespacedCustomObject({ ...PROJECT, namespace: 'acme', name: 'web' })));
    assert.ok(await gone(core.readNamespace({ name: 'acme-web' })));
    assert.ok(await gone(custom.getNamespacedCustomObject({ ...ORG, namespace: 'acme', name: 'acme' })));
  });

  test('a namespace terminates until the objects finalizers hold are gone, and refuses new ones meanwhile', async () => {
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: 'held' } } });
    kube.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'pinned', namespace: 'held', finalizers: ['example.com/hold'] } });
    await core.deleteNamespace({ name: 'held' });
    const ns = await core.readNamespace({ name: 'held' });
    assert.equal(ns.status?.phase, 'Terminating');
    await assert.rejects(
      core.createNamespacedConfigMap({ namespace: 'held', body: { metadata: { name: 'late' } } }),
      (e: unknown) => e instanceof ApiException && e.code === 403,
    );
    kube.patch('v1', 'ConfigMap', 'pinned', 'held', { metadata: { finalizers: [] } });
    await assert.rejects(core.readNamespace({ name: 'held' }), (e: unknown) => e instanceof ApiException && e.code === 404);
  });

  test('a failing reconcile shows in the Ready condition; a public project is refused unless allowed', async () => {
    const custom = kube.kubeConfig().makeApiClient(CustomObjectsApi);
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'beta' } });
    controller.fail('Organization', 'beta', 'beta', 'keycloak realm creation failed');
    kube.create({
      apiVersion: 'kube-dc.com/v1',
      kind: 'Organization',
      metadata: { name: 'beta', namespace: 'beta' },
      spec: { email: 'a@b.cd' },
    });
    controller.step();
    let org = await custom.getNamespacedCustomObject({ ...ORG, namespace: 'beta', name: 'beta' });
    assert.deepEqual([org.status.ready, org.status.conditions[0].reason], [false, 'ReconcileError']);
    controller.heal('Organization', 'beta', 'beta');
    controller.step();
    org = await custom.getNamespacedCustomObject({ ...ORG, namespace: 'beta', name: 'beta' });
    assert.equal(org.status.ready, true);
    kube.create({
      apiVersion: 'kube-dc.com/v1',
      kind: 'Project',
      metadata: { name: 'pub', namespace: 'beta' },
      spec: { cidrBlock: '10.1.0.0/24', egressNetworkType: 'public' },
    });
    controller.step();
    const project = await custom.getNamespacedCustomObject({ ...PROJECT, namespace: 'beta', name: 'pub' });
    assert.equal(project.status.conditions[0].reason, 'PublicProjectsDisabled');
  });

  test('VMs follow their run strategy; a postgresql database stops while its CNPG Cluster hibernates', () => {
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'wl' } });
    kube.create({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: 'vm1', namespace: 'wl' },
      spec: { runStrategy: 'Always' },
    });
    kube.create({
      apiVersion: 'db.kube-dc.com/v1alpha1',
      kind: 'KdcDatabase',
      metadata: { name: 'db1', namespace: 'wl' },
      spec: { engine: 'postgresql', replicas: 2 },
    });
    controller.step();
    assert.equal(
      (kube.get('kubevirt.io/v1', 'VirtualMachine', 'vm1', 'wl').status as { printableStatus: string }).printableStatus,
      'Running',
    );
    assert.equal((kube.get('db.kube-dc.com/v1alpha1', 'KdcDatabase', 'db1', 'wl').status as { readyInstances: number }).readyInstances, 2);
    kube.patch('kubevirt.io/v1', 'VirtualMachine', 'vm1', 'wl', { spec: { runStrategy: 'Halted' } });
    kube.patch('postgresql.cnpg.io/v1', 'Cluster', 'db1', 'wl', { metadata: { annotations: { 'cnpg.io/hibernation': 'on' } } });
    controller.step();
    assert.equal(
      (kube.get('kubevirt.io/v1', 'VirtualMachine', 'vm1', 'wl').status as { printableStatus: string }).printableStatus,
      'Stopped',
    );
    assert.equal((kube.get('db.kube-dc.com/v1alpha1', 'KdcDatabase', 'db1', 'wl').status as { readyInstances: number }).readyInstances, 0);
  });
});
