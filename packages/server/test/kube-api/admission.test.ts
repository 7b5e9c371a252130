import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions } from '@kubernetes/client-node';
import { refusal } from './http.ts';
import { KubeApi } from './index.ts';
import { installKubeDc } from './kube-dc.ts';
import { installKubeDcPolicies } from './kube-dc-policies.ts';
import { kubectl } from './kubectl-run.ts';

const ORG = { group: 'kube-dc.com', version: 'v1', plural: 'organizations' };
const VM = { group: 'kubevirt.io', version: 'v1', plural: 'virtualmachines' };
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const TENANT = 'system:serviceaccount:acme:tenantry';
const BACKEND = 'system:serviceaccount:kube-dc:kube-dc-backend';
const ANNOTATIONS_DENIED =
  'organizations.kube-dc.com "acme" is forbidden: ValidatingAdmissionPolicy \'protect-kube-dc-resource-annotations\' with binding ' +
  "'protect-kube-dc-resource-annotations' denied request: Modifying annotations on this resource is not allowed. Only system controllers can change annotations.";
const QUOTA_DENIED = (name: string) =>
  `resourcequotas "${name}" is forbidden: ValidatingAdmissionPolicy 'protect-kube-dc-resource-quotas' with binding ` +
  "'protect-kube-dc-resource-quotas' denied request: This ResourceQuota is managed by kube-dc and cannot be changed directly.";

/**
 * Kube-DC's ValidatingAdmissionPolicies (test/kube-dc/policies/, rendered from Kube-DC's chart) on the
 * double: each refusal a Kube-DC cluster makes, and each exemption it grants (Kube-DC facts §2.1-2.3).
 */
describe('Kube-DC admission policies on the Kubernetes API double', () => {
  let kube: KubeApi;
  before(async () => {
    kube = await KubeApi.start();
    installKubeDc(kube);
    installKubeDcPolicies(kube, { gpu: true });
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'acme' } });
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'acme-web', labels: { 'kube-dc.com/project': '' } } });
  });
  after(() => kube.close());

  const annotate = (user: string, value: string, as?: string) =>
    kube
      .kubeConfigContexts([{ name: 'c', user, ...(as ? { as } : {}) }])
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObject(
        { ...ORG, namespace: 'acme', name: 'acme', body: { metadata: { annotations: { 'billing.kube-dc.com/plan-id': value } } } },
        merge,
      );

  test('Organization annotations: set at CREATE by anyone, changed afterwards only by kube-dc service accounts and system:masters', async () => {
    const tenant = kube.kubeConfig(TENANT).makeApiClient(CustomObjectsApi);
    await tenant.createNamespacedCustomObject({
      ...ORG,
      namespace: 'acme',
      body: {
        apiVersion: 'kube-dc.com/v1',
        kind: 'Organization',
        metadata: { name: 'acme', annotations: { 'billing.kube-dc.com/plan-id': 'dev-pool' } },
        spec: { email: 'ops@acme.example' },
      },
    });
    const denied = await refusal(annotate(TENANT, 'scale-pool'));
    assert.equal(denied.code, 422);
    assert.equal(denied.reason, 'Invalid');
    assert.equal(denied.message, ANNOTATIONS_DENIED);
    assert.equal(
      kube.get('kube-dc.com/v1', 'Organization', 'acme', 'acme').metadata.annotations?.['billing.kube-dc.com/plan-id'],
      'dev-pool',
    );
    // Removing the last annotation is a change too; the spec is the tenant's to change.
    const removal = tenant.patchNamespacedCustomObject(
      { ...ORG, namespace: 'acme', name: 'acme', body: { metadata: { annotations: null } } },
      merge,
    );
    assert.equal((await refusal(removal)).code, 422);
    await tenant.patchNamespacedCustomObject(
      { ...ORG, namespace: 'acme', name: 'acme', body: { spec: { email: 'billing@acme.example' } } },
      merge,
    );
    // A cluster admin without system:masters is refused like anyone else.
    kube.addUser('ops-admin', { groups: ['cluster-admins'] });
    assert.equal((await refusal(annotate('ops-admin', 'scale-pool'))).code, 422);

    await annotate('system:serviceaccount:kube-dc:anything', 'pro-pool');
    await annotate('admin', 'scale-pool');
    assert.equal(
      kube.get('kube-dc.com/v1', 'Organization', 'acme', 'acme').metadata.annotations?.['billing.kube-dc.com/plan-id'],
      'scale-pool',
    );
  });

  test('a service account impersonating a kube-dc service account, with RBAC to do so, changes annotations', async () => {
    const rbac = kube.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: 'kube-dc',
      body: {
        metadata: { name: 'impersonate-x' },
        rules: [{ apiGroups: [''], resources: ['serviceaccounts'], verbs: ['impersonate'], resourceNames: ['x'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: 'kube-dc',
      body: {
        metadata: { name: 'tenantry-as-x' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'impersonate-x' },
        subjects: [{ kind: 'ServiceAccount', name: 'tenantry', namespace: 'acme' }],
      },
    });
    await rbac.createClusterRole({
      body: { metadata: { name: 'org-writer' }, rules: [{ apiGroups: ['kube-dc.com'], resources: ['organizations'], verbs: ['patch'] }] },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: 'x-writes-orgs' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'org-writer' },
        subjects: [{ kind: 'ServiceAccount', name: 'x', namespace: 'kube-dc' }],
      },
    });
    kube.enforceRbac(true);
    try {
      await annotate(TENANT, 'dev-pool', 'system:serviceaccount:kube-dc:x');
      assert.equal(
        kube.get('kube-dc.com/v1', 'Organization', 'acme', 'acme').metadata.annotations?.['billing.kube-dc.com/plan-id'],
        'dev-pool',
      );
      // Impersonating anyone else is refused before admission is reached.
      assert.equal((await refusal(annotate(TENANT, 'pro-pool', 'system:serviceaccount:kube-dc:y'))).code, 403);
    } finally {
      kube.enforceRbac(false);
    }
  });

  test('kubectl annotate: refused for the tenant, done with --as a kube-dc service account', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kubectl-vap-'));
    try {
      const config = await kube.writeKubeconfig(join(dir, 'config'), TENANT);
      const args = ['annotate', '--overwrite', '-n', 'acme', 'organization/acme'];
      const refused = await kubectl(config, [...args, 'billing.kube-dc.com/plan-id=pro-pool']);
      assert.equal(refused.code, 1);
      // kubectl prints a 422 as "is invalid", with the policy's denial as the cause.
      assert.match(
        refused.stderr,
        /The organizations "acme" is invalid: : ValidatingAdmissionPolicy 'protect-kube-dc-resource-annotations'/,
      );
      const done = await kubectl(config, [...args, 'billing.kube-dc.com/plan-id=pro-pool', '--as=system:serviceaccount:kube-dc:kubectl']);
      assert.equal(done.stdout.trim(), 'organization.kube-dc.com/acme annotated', done.stderr);
      assert.equal(
        kube.get('kube-dc.com/v1', 'Organization', 'acme', 'acme').metadata.annotations?.['billing.kube-dc.com/plan-id'],
        'pro-pool',
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('project-quota in a project namespace: only the backend service account, system:masters and the teardown write it', async () => {
    const quota = (name: string) => ({ metadata: { name }, spec: { hard: { 'requests.cpu': '2' } } });
    const as = (user: string) => kube.kubeConfig(user).makeApiClient(CoreV1Api);
    const tenantCreate = await refusal(as(TENANT).createNamespacedResourceQuota({ namespace: 'acme-web', body: quota('project-quota') }));
    assert.equal(tenantCreate.code, 422);
    assert.equal(tenantCreate.message, QUOTA_DENIED('project-quota'));
    // Another kube-dc service account is not the backend: the exemption names one account.
    const manager = 'system:serviceaccount:kube-dc:kube-dc-manager';
    assert.equal(
      (await refusal(as(manager).createNamespacedResourceQuota({ namespace: 'acme-web', body: quota('project-quota') }))).code,
      422,
    );
    await as(BACKEND).createNamespacedResourceQuota({ namespace: 'acme-web', body: quota('project-quota') });
    await as(BACKEND).patchNamespacedResourceQuota(
      { namespace: 'acme-web', name: 'project-quota', body: { spec: { hard: { 'requests.cpu': '3' } } } },
      merge,
    );
    const update = as(TENANT).patchNamespacedResourceQuota(
      { namespace: 'acme-web', name: 'project-quota', body: { spec: { hard: {} } } },
      merge,
    );
    assert.equal((await refusal(update)).message, QUOTA_DENIED('project-quota'));
    assert.equal((await refusal(as(TENANT).deleteNamespacedResourceQuota({ namespace: 'acme-web', name: 'project-quota' }))).code, 422);
    // The garbage collector may delete it, but not change it.
    const gc = 'system:serviceaccount:kube-system:generic-garbage-collector';
    assert.equal(
      (await refusal(as(gc).patchNamespacedResourceQuota({ namespace: 'acme-web', name: 'project-quota', body: {} }, merge))).code,
      422,
    );
    await as('admin').patchNamespacedResourceQuota(
      { namespace: 'acme-web', name: 'project-quota', body: { spec: { hard: { pods: '5' } } } },
      merge,
    );

    // Other names, and the same name outside project namespaces, are not Kube-DC's.
    await as(TENANT).createNamespacedResourceQuota({ namespace: 'acme-web', body: quota('team-quota') });
    await as(TENANT).createNamespacedResourceQuota({ namespace: 'acme', body: quota('project-quota') });
    // HNC's quota: its own service accounts only.
    assert.equal(
      (await refusal(as(BACKEND).createNamespacedResourceQuota({ namespace: 'acme-web', body: quota('hrq.hnc.x-k8s.io') }))).code,
      422,
    );
    await as('system:serviceaccount:hnc-system:hnc-controller-manager').createNamespacedResourceQuota({
      namespace: 'acme-web',
      body: quota('hrq.hnc.x-k8s.io'),
    });
    await as(gc).deleteNamespacedResourceQuota({ namespace: 'acme-web', name: 'hrq.hnc.x-k8s.io' });

    // Deleting the namespace: the namespace controller deletes the reserved quotas, and the namespace goes.
    await as('admin').deleteNamespace({ name: 'acme-web' });
    assert.equal(kube.tryGet('v1', 'Namespace', 'acme-web'), undefined);
    assert.deepEqual(kube.list('v1', 'ResourceQuota', 'acme-web'), []);
  });

  test('GPU VM policy: generic hostDevices are refused in project namespaces; a GPU VM needs its profile', async () => {
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'acme-gpu', labels: { 'kube-dc.com/project': '' } } });
    const vm = (name: string, devices: Record<string, unknown>, extra: { labels?: Record<string, string>; eviction?: string } = {}) => ({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name, ...(extra.labels ? { labels: extra.labels } : {}) },
      spec: {
        runStrategy: 'Always',
        template: {
          metadata: { labels: { 'kubevirt.io/domain': name, ...extra.labels } },
          spec: { ...(extra.eviction ? { evictionStrategy: extra.eviction } : {}), domain: { devices } },
        },
      },
    });
    const tenant = kube.kubeConfig(TENANT).makeApiClient(CustomObjectsApi);
    const create = (body: object, namespace = 'acme-gpu') => tenant.createNamespacedCustomObject({ ...VM, namespace, body });
    const passthrough = { deviceName: 'pci-0000:3b:00.0', name: 'gpu0' };
    const hostDevices = await refusal(create(vm('raw', { hostDevices: [passthrough] })));
    assert.equal(hostDevices.code, 422);
    assert.equal(
      hostDevices.message,
      'virtualmachines.kubevirt.io "raw" is forbidden: ValidatingAdmissionPolicy \'kube-dc-gpu-virtualmachines\' with binding ' +
        "'kube-dc-gpu-virtualmachines' denied request: Project virtual machines must use domain.devices.gpus; generic hostDevices are not allowed.",
    );
    const gpu = { deviceName: 'nvidia.com/GV100GL_TESLA_V100_PCIE_32GB', name: 'gpu0' };
    const unlabelled = await refusal(create(vm('no-profile', { gpus: [gpu] }, { eviction: 'None' })));
    assert.match(unlabelled.message, /denied request: GPU VMs require an enabled kube-dc GPU profile label\.$/);
    const profile = { 'kube-dc.com/gpu-profile': 'nvidia-v100-passthrough' };
    const migratable = await refusal(create(vm('migratable', { gpus: [gpu] }, { labels: profile })));
    assert.match(migratable.message, /denied request: GPU virtual machines must explicitly use evictionStrategy: None\.$/);
    const wrongCard = await refusal(
      create(vm('wrong-card', { gpus: [{ ...gpu, deviceName: 'nvidia.com/A100' }] }, { labels: profile, eviction: 'None' })),
    );
    assert.match(wrongCard.message, /denied request: Every GPU device must match the selected kube-dc GPU profile\.$/);

    await create(vm('plain', { disks: [{ name: 'root', disk: { bus: 'virtio' } }] }));
    await create(vm('gpu', { gpus: [gpu] }, { labels: profile, eviction: 'None' }));
    // Outside project namespaces, and for system:masters, the policy does not apply.
    await create(vm('raw', { hostDevices: [passthrough] }), 'acme');
    await kube
      .kubeConfig('admin')
      .makeApiClient(CustomObjectsApi)
      .createNamespacedCustomObject({ ...VM, namespace: 'acme-gpu', body: vm('raw', { hostDevices: [passthrough] }) });
  });
});
