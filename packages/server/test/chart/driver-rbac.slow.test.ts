import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DRIVER_CHART_VALUES, DRIVER_USER } from '../kube-dc-cluster.ts';
import { context, drive, type KubernetesFixture, startKubernetesFixture } from '../kubernetes-platform.ts';
import { lint, type RenderedObject, template } from './helm.ts';
import { validateObject } from './schemas.ts';

const DRIVER = DRIVER_CHART_VALUES;

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

function rulesOf(objects: RenderedObject[], kind: string): Rule[] {
  const found = objects.find(
    (o) =>
      o.kind === kind && o.metadata.name === 'tenantry-platform-driver' && (kind === 'ClusterRole' || o.metadata.namespace === 'tenantry'),
  );
  assert.ok(found, `${kind} tenantry-platform-driver is rendered`);
  return (found as unknown as { rules: Rule[] }).rules;
}

/**
 * The driver's least-privilege RBAC as the chart renders it, checked against what the driver really does:
 * a customer's whole life runs on the doubles, and every request the driver sent must be allowed by the
 * rendered rules (the Role for its own namespace, the ClusterRole elsewhere), and no rule may go unused
 * by a verb the code has.
 */
describe('chart: the kubernetes platform driver RBAC', () => {
  let objects: RenderedObject[];
  let fx: KubernetesFixture;
  before(async () => {
    const rendered = template(DRIVER);
    assert.equal(rendered.error, undefined, rendered.error ?? '');
    objects = rendered.objects;
    for (const object of objects) validateObject(object);
    fx = await startKubernetesFixture();
  });
  after(() => fx.close());

  test('helm lint passes; the settings, the secret file and the token reach tenantry serve', () => {
    const result = lint(DRIVER);
    assert.equal(result.status, 0, result.stdout + result.stderr);
    const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'tenantry') as unknown as {
      data: Record<string, string>;
    };
    assert.equal(config.data.TENANTRY_PLATFORM, 'kubernetes');
    assert.equal(config.data.TENANTRY_IDP_URL, 'https://login.example.com');
    assert.equal(config.data.TENANTRY_ADDRESS_POOL, '10.100.0.0/16');
    assert.equal(config.data.TENANTRY_IDP_CLIENT_SECRET_FILE, '/etc/tenantry/idp/client-secret');
    const deployment = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tenantry') as unknown as {
      spec: {
        template: { spec: { automountServiceAccountToken: boolean; volumes: Array<{ name: string; secret?: { secretName: string } }> } };
      };
    };
    assert.equal(deployment.spec.template.spec.automountServiceAccountToken, true);
    assert.equal(deployment.spec.template.spec.volumes.find((v) => v.name === 'idp-client-secret')?.secret?.secretName, 'tenantry-idp');
  });

  test('no wildcard, no Secrets, no Pods; ConfigMaps only in the release namespace', () => {
    const cluster = rulesOf(objects, 'ClusterRole');
    const role = rulesOf(objects, 'Role');
    for (const rule of [...cluster, ...role]) {
      assert.ok(![...rule.apiGroups, ...rule.resources, ...rule.verbs].includes('*'), JSON.stringify(rule));
      assert.ok(!rule.resources.some((r) => ['secrets', 'pods', 'configmaps'].includes(r)) || role.includes(rule), JSON.stringify(rule));
    }
    assert.ok(!cluster.some((r) => r.resources.includes('configmaps')));
    assert.equal(objects.find((o) => o.kind === 'Role' && o.metadata.name === 'tenantry-platform-driver')?.metadata.namespace, 'tenantry');
  });

  test('rendering fails clearly when a required driver setting is missing', () => {
    const missing = template({ ...DRIVER, platformDriver: { kubernetes: { ...DRIVER.platformDriver.kubernetes, addressPool: '' } } });
    assert.match(missing.error ?? '', /platformDriver\.kubernetes\.addressPool is required/);
    const noSecret = template({
      ...DRIVER,
      platformDriver: {
        kubernetes: { ...DRIVER.platformDriver.kubernetes, identity: { url: 'https://x', loginRedirectURL: 'https://c/' } },
      },
    });
    assert.match(noSecret.error ?? '', /identity\.clientSecret\.secretName is required/);
    const noRedirect = template({
      ...DRIVER,
      platformDriver: {
        kubernetes: {
          ...DRIVER.platformDriver.kubernetes,
          identity: { url: 'https://x', clientSecret: { secretName: 'idp' }, login: 'action-token' },
        },
      },
    });
    assert.match(noRedirect.error ?? '', /identity\.loginRedirectURL is required with identity\.login=action-token/);
  });

  test("every request of a customer's life is allowed by the rendered rules", async () => {
    const kube = fx.kube;
    assert.ok(kube);
    const ctx = context('p-rbac');
    const org = { customerId: 'rbac', organization: 'rbac' };
    const project = { ...org, project: 'web', namespace: 'rbac-web' };
    assert.deepEqual(
      (await drive(fx, () => fx.platform.ensureOrganization(ctx, { ...org, displayName: null, planId: 'dev-pool' }))).at(-1),
      { state: 'done' },
    );
    const user = {
      ...org,
      username: 'own',
      email: 'own@rbac.example',
      role: 'admin' as const,
      isOwner: true,
      firstName: null,
      lastName: null,
    };
    assert.deepEqual(await fx.platform.ensureUser(ctx, user), { state: 'done' });
    const range = await fx.platform.reserveAddressRange(ctx, project);
    assert.deepEqual(
      (await drive(fx, () => fx.platform.ensureProject(ctx, { ...project, cidr: range.state === 'done' ? range.cidr : '' }))).at(-1),
      { state: 'done' },
    );
    const quota = { planId: 'dev-pool', quota: { vcpu: 2, memory_gib: 4, storage_gib: 20, gpus: {} }, projectCaps: { web: { vcpu: 1 } } };
    assert.deepEqual(await fx.platform.applyQuota(ctx, org, quota), { state: 'done' });
    assert.deepEqual(
      await fx.platform.applyQuota(ctx, org, { ...quota, quota: { ...quota.quota, vcpu: 3 }, projectCaps: { web: { vcpu: 3 } } }),
      { state: 'done' },
    );
    assert.deepEqual(await fx.platform.applyQuota(ctx, org, { ...quota, projectCaps: {} }), { state: 'done' });
    kube.create({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: 'vm', namespace: project.namespace },
      spec: { runStrategy: 'Always' },
    });
    kube.create({
      apiVersion: 'db.kube-dc.com/v1alpha1',
      kind: 'KdcDatabase',
      metadata: { name: 'db', namespace: project.namespace },
      spec: { engine: 'postgresql' },
    });
    await fx.settle();
    const image = {
      osName: 'Debian 12',
      url: 'https://images.example/debian-12.qcow2',
      cloudUser: 'debian',
      firmware: 'efi' as const,
      machineType: 'q35',
      features: ['acpi', 'smm', 'tpm'],
      cloudInit: '#cloud-config\n',
      bootOrder: ['disk'],
      additionalDisks: null,
    };
    const vmQuota = { customer: { vcpu: 8, memory_gib: 16, storage_gib: 100 }, project: {} };
    assert.deepEqual(
      await fx.platform.createVm(ctx, {
        ...org,
        namespace: project.namespace,
        name: 'form',
        vcpu: 1,
        memoryGib: 1,
        storageGib: 10,
        image,
        quota: vmQuota,
      }),
      { state: 'done' },
    );
    // The console's buttons and quota card: a VM stopped, started, counted and deleted.
    const formVm = { ...org, namespace: project.namespace, name: 'form' };
    assert.deepEqual(await fx.platform.stopVm(ctx, formVm), { state: 'done' });
    assert.deepEqual(await fx.platform.startVm(ctx, formVm), { state: 'done' });
    assert.equal((await fx.platform.heldResources(ctx, org)).customer.storage_gib, 10);
    await fx.platform.stopWorkloads(ctx, org);
    await fx.platform.startWorkloads(ctx, org);
    assert.deepEqual(await fx.platform.deleteVm(ctx, formVm), { state: 'done' });
    await fx.platform.prepareConsoleLogin(ctx, { ...org, username: 'own' });
    assert.deepEqual((await drive(fx, () => fx.platform.deleteProject(ctx, project))).at(-1), { state: 'done' });
    assert.deepEqual((await drive(fx, () => fx.platform.deleteOrganization(ctx, org))).at(-1), { state: 'done' });

    // The double enforced the chart's RBAC on every request (kube-dc-cluster.ts): the life above completing
    // proves each was granted. What is left to show is that no granted rule goes unused.
    const cluster = rulesOf(objects, 'ClusterRole');
    const sent = kube.requests((r) => r.user === DRIVER_USER && r.verb !== 'discovery' && r.resource !== undefined);
    assert.ok(sent.length > 40);
    const used = new Set<string>();
    for (const request of sent) {
      const resource = request.subresource ? `${request.resource}/${request.subresource}` : (request.resource ?? '');
      used.add(`${request.group ?? ''}/${resource}/${request.verb}`);
    }
    for (const rule of cluster)
      for (const group of rule.apiGroups)
        for (const resource of rule.resources.filter((r) => !r.startsWith('partners')))
          for (const verb of rule.verbs.filter((v) => v !== 'watch'))
            assert.ok(used.has(`${group}/${resource}/${verb}`), `the rule ${verb} ${group}/${resource} is never used by the driver`);
  });
});
