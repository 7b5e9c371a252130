import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { context, drive, type KubernetesFixture, startKubernetesFixture } from '../../../test/kubernetes-platform.ts';
import type { OrganizationRef, PlatformVm } from '../platform.ts';
import { KeycloakAdmin } from './keycloak.ts';
import { createKubernetesPlatform } from './kubernetes-platform.ts';

/**
 * What a Kube-DC cluster refuses, met by the driver the way a real cluster would meet it: the doubles
 * here enforce Kube-DC's CRD schemas, its admission policies and project webhook, the chart's RBAC, and
 * its controller's and Keycloak 26's behaviour (docs/platform-kubernetes.md lists each with its source).
 * Doubles only: the refusals are set up through them.
 */
describe("kubernetes platform: Kube-DC's refusals", () => {
  let fx: KubernetesFixture;
  const ctx = context('p-refuse');
  let n = 0;
  const fresh = (): OrganizationRef => ({ customerId: `r${n}`, organization: `t${process.pid}-r${n++}` });
  const ready = async (org: OrganizationRef, planId = 'dev-pool') => {
    const seen = await drive(fx, () => fx.platform.ensureOrganization(ctx, { ...org, displayName: null, planId }));
    assert.deepEqual(seen.at(-1), { state: 'done' });
  };
  const readyProject = async (org: OrganizationRef) => {
    const project = { ...org, project: 'web', namespace: `${org.organization}-web` };
    const range = await fx.platform.reserveAddressRange(ctx, project);
    assert.equal(range.state, 'done');
    const seen = await drive(fx, () => fx.platform.ensureProject(ctx, { ...project, cidr: range.state === 'done' ? range.cidr : '' }));
    return { project, last: seen.at(-1) };
  };
  before(async () => {
    fx = await startKubernetesFixture();
  });
  after(() => fx.close());

  test('a realm that exists before its Organization is not taken over, changed or deleted', async () => {
    const org = fresh();
    // Someone else's realm of that name (an earlier install, an operator's own).
    fx.keycloak?.provisionOrganizationRealm(org.organization, { email: 'someone@elsewhere.example' });
    const seen = await drive(fx, () => fx.platform.ensureOrganization(ctx, { ...org, displayName: null, planId: 'dev-pool' }));
    const last = seen.at(-1);
    assert.equal(last?.state === 'failed' && last.code, 'PROVISIONING_FAILED');
    assert.match(last?.state === 'failed' ? last.message : '', /exists before its Organization/);
    assert.equal(fx.kube?.tryGet('kube-dc.com/v1', 'Organization', org.organization, org.organization), undefined, 'no Organization made');
    assert.deepEqual(await drive(fx, () => fx.platform.deleteOrganization(ctx, org)).then((s) => s.at(-1)), { state: 'done' });
    const admin = await new KeycloakAdmin(fx.config.identity).findUser(org.organization, 'admin');
    assert.equal(admin?.email, 'someone@elsewhere.example', 'the realm and its users are as they were');
  });

  test('a plan change without the plan writer is refused by Kube-DC as UPSTREAM_422 with its words; with it, it passes', async () => {
    const org = fresh();
    await ready(org);
    const quota = { planId: 'pro-pool', quota: { vcpu: 8, memory_gib: 32, storage_gib: 200, gpus: {} }, projectCaps: {} };
    // Even with RBAC to patch Organizations (as an operator might grant the driver), Kube-DC's admission
    // refuses an annotation change from any service account outside its own namespace.
    fx.kube?.create({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'driver-may-patch-organizations' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'tenantry-plan-writer' },
      subjects: [{ kind: 'ServiceAccount', name: 'tenantry', namespace: 'tenantry' }],
    });
    const withoutWriter = createKubernetesPlatform(
      { ...fx.config, kubeDcServiceAccount: undefined },
      pino({ level: 'silent' }),
      fx.kubeConfig,
    );
    const refused = await withoutWriter.applyQuota(ctx, org, quota);
    assert.equal(refused.state === 'failed' && refused.code, 'UPSTREAM_422');
    assert.match(refused.state === 'failed' ? refused.message : '', /Modifying annotations on this resource is not allowed/);
    assert.deepEqual(await fx.platform.applyQuota(ctx, org, quota), { state: 'done' });
    const annotations = fx.kube?.get('kube-dc.com/v1', 'Organization', org.organization, org.organization).metadata.annotations;
    assert.equal(annotations?.['billing.kube-dc.com/plan-id'], 'pro-pool');
    fx.kube?.delete('rbac.authorization.k8s.io/v1', 'ClusterRoleBinding', 'driver-may-patch-organizations');
  });

  test("a public project is refused at creation by Kube-DC's project webhook, as UPSTREAM_403 with its words", async () => {
    const org = fresh();
    await ready(org);
    const publicDriver = createKubernetesPlatform({ ...fx.config, egressNetworkType: 'public' }, pino({ level: 'silent' }), fx.kubeConfig);
    const project = { ...org, project: 'pub', namespace: `${org.organization}-pub` };
    const range = await publicDriver.reserveAddressRange(ctx, project);
    const refused = await publicDriver.ensureProject(ctx, { ...project, cidr: range.state === 'done' ? range.cidr : '' });
    assert.equal(refused.state === 'failed' && refused.code, 'UPSTREAM_403');
    assert.match(refused.state === 'failed' ? refused.message : '', /admission webhook "vproject.kube-dc.com" denied the request/);
  });

  test("a project past the organization's project limit fails with Kube-DC's LimitCheck message", async () => {
    const org = fresh();
    await ready(org);
    if (fx.controller) fx.controller.projectsLimit = 0;
    try {
      const { last } = await readyProject(org);
      assert.equal(last?.state === 'failed' && last.code, 'PROVISIONING_FAILED');
      assert.match(
        last?.state === 'failed' ? last.message : '',
        /LimitCheck LimitExceeded: organization .* has reached its limit of 0 projects/,
      );
    } finally {
      if (fx.controller) fx.controller.projectsLimit = 50;
    }
  });

  const vm = (org: OrganizationRef, namespace: string, name: string, memoryGib: number): PlatformVm => ({
    ...org,
    namespace,
    name,
    vcpu: 1,
    memoryGib,
    storageGib: 20,
    image: {
      osName: 'Ubuntu 24.04 LTS',
      url: 'https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img',
      cloudUser: 'ubuntu',
      firmware: 'bios',
      machineType: 'q35',
      features: ['acpi'],
      cloudInit: null,
      bootOrder: ['disk'],
      additionalDisks: null,
    },
    quota: { customer: { vcpu: 8, memory_gib: 64, storage_gib: 200 }, project: {} },
  });

  test("a VM is built like Kube-DC's wizard: Multus default network on a bridge, the project's keys for the image's user, a disk of its own", async () => {
    const org = fresh();
    await ready(org);
    const { project } = await readyProject(org);
    // KubeVirt (the controller double) starts it at once: the answer does not wait out the start check.
    fx.controller?.resume();
    assert.deepEqual(await fx.platform.createVm(ctx, vm(org, project.namespace, 'web-1', 2)), { state: 'done' });
    fx.controller?.pause();
    const object = fx.kube?.get('kubevirt.io/v1', 'VirtualMachine', 'web-1', project.namespace);
    const spec = object?.spec as {
      template: {
        spec: { networks: unknown[]; accessCredentials: unknown[]; domain: { devices: { interfaces: unknown[] }; resources: unknown } };
      };
    };
    assert.deepEqual(spec.template.spec.networks, [
      { name: 'default', multus: { default: true, networkName: `${project.namespace}/default` } },
    ]);
    assert.deepEqual(spec.template.spec.domain.devices.interfaces, [{ name: 'default', bridge: {} }]);
    assert.deepEqual(spec.template.spec.accessCredentials, [
      {
        sshPublicKey: {
          source: { secret: { secretName: 'authorized-keys-default' } },
          propagationMethod: { qemuGuestAgent: { users: ['ubuntu'] } },
        },
      },
    ]);
    assert.deepEqual(spec.template.spec.domain.resources, { requests: { cpu: '1', memory: '2Gi' }, limits: { cpu: '1', memory: '2Gi' } });
    const disk = fx.kube?.get('cdi.kubevirt.io/v1beta1', 'DataVolume', 'web-1-disk', project.namespace);
    assert.equal(disk?.metadata.ownerReferences?.[0]?.name, 'web-1', 'the disk goes with its VM');
  });

  test("a VM over the plan's LimitRange is refused with its words; one whose launcher pod the cluster refuses later is too", async () => {
    const org = fresh();
    await ready(org);
    const { project } = await readyProject(org);
    // dev-pool's LimitRange (HNC copied it into the project): at most 8Gi a container.
    const over = await fx.platform.createVm(ctx, vm(org, project.namespace, 'big', 16));
    assert.equal(over.state === 'refused' && over.code, 'UPSTREAM_403');
    assert.match(over.state === 'refused' ? over.message : '', /maximum memory usage per Container is 8Gi, but limit is 16Gi/);
    assert.equal(fx.kube?.tryGet('kubevirt.io/v1', 'VirtualMachine', 'big', project.namespace), undefined, 'nothing was created');

    // The plan tightened between the check and the start: KubeVirt reports the launcher pod refused.
    const kube = fx.kube;
    if (!kube || !fx.controller) return;
    fx.controller.resume();
    kube.faults.delay(200, { count: 1, match: (r) => r.verb === 'create' && r.resource === 'virtualmachines' });
    const creates = () => kube.requests((r) => r.verb === 'create' && r.resource === 'virtualmachines').length;
    const before = creates();
    const pending = fx.platform.createVm(ctx, vm(org, project.namespace, 'late', 4));
    // The driver has checked the LimitRange and its create is held on the wire: the plan tightens now.
    while (creates() === before) await new Promise((resolve) => setImmediate(resolve));
    kube.patch('v1', 'LimitRange', 'default-resource-limits', project.namespace, {
      spec: { limits: [{ type: 'Container', max: { cpu: '4', memory: '2Gi' } }] },
    });
    const late = await pending;
    fx.controller.pause();
    assert.equal(late.state === 'refused' && late.code, 'UPSTREAM_403');
    assert.match(
      late.state === 'refused' ? late.message : '',
      /virt-launcher-late-.* is forbidden: maximum memory usage per Container is 2Gi, but limit is 4Gi/,
    );
    assert.equal(kube.tryGet('kubevirt.io/v1', 'VirtualMachine', 'late', project.namespace), undefined, 'the refused VM is taken away');
  });
});
