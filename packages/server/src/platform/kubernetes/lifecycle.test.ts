import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApisApi } from '@kubernetes/client-node';
import { context, drive, type KubernetesFixture, REAL_CLUSTER, startKubernetesFixture } from '../../../test/kubernetes-platform.ts';
import { workloadsRunning } from '../platform.ts';
import { KeycloakAdmin } from './keycloak.ts';

const VM = ['kubevirt.io/v1', 'VirtualMachine'] as const;

/**
 * A live customer's whole life on the kubernetes driver, through the Platform interface only (so it can
 * be folded into the platform conformance suite), with the cluster's state checked on the doubles.
 * With TENANTRY_TEST_KUBECONFIG set it runs against that cluster instead (the double-only checks are
 * skipped there, each saying why).
 */
describe('kubernetes platform: a customer from creation to deletion', () => {
  let fx: KubernetesFixture;
  const ctx = context('p-one');
  const org = { customerId: 'acme', organization: `t${process.pid}-acme` };
  const project = { ...org, project: 'web', namespace: `${org.organization}-web` };
  before(async () => {
    fx = await startKubernetesFixture();
  });
  after(() => fx.close());

  test('the organization: namespace, Organization with its plan; done once Kube-DC says ready and its realm is there', async () => {
    const seen = await drive(fx, () => fx.platform.ensureOrganization(ctx, { ...org, displayName: 'Acme & Co. (EU)', planId: 'dev-pool' }));
    assert.equal(seen[0]?.state, 'in_progress', 'the first look finds the controller not done yet');
    assert.deepEqual(seen.at(-1), { state: 'done' });
    assert.deepEqual(
      await fx.platform.ensureOrganization(ctx, { ...org, displayName: 'Acme', planId: 'dev-pool' }),
      { state: 'done' },
      'a repeat is done at once',
    );
    if (!fx.kube || !fx.keycloak) return;
    const organization = fx.kube.get('kube-dc.com/v1', 'Organization', org.organization, org.organization);
    assert.equal(organization.metadata.annotations?.['billing.kube-dc.com/plan-id'], 'dev-pool');
    assert.equal(
      (organization.spec as { description: string }).description,
      'Acme Co. EU',
      'the description keeps only what the CRD allows',
    );
    assert.equal((organization.spec as { email: string }).email, `platform+${org.organization}@tenantry.invalid`);
    assert.equal(fx.kube.get('v1', 'Namespace', org.organization).metadata.labels?.['tenantry.io/partner'], 'p-one');
    assert.equal(fx.kube.requests((r) => r.verb === 'create' && r.resource === 'organizations').length, 1);
    // The realm is Kube-DC's: its controller made it with the admin user; the driver made no realm.
    assert.ok(fx.keycloak.user(org.organization, 'admin'));
    assert.equal(fx.keycloak.log.filter((r) => r.method === 'POST' && r.path === '/admin/realms').length, 0);
  });

  test("users: the owner and admins join Kube-DC's org-admin group, members its user group; repeats change nothing", async () => {
    const owner = {
      ...org,
      username: 'ada',
      email: 'Ada@Acme.example',
      role: 'admin' as const,
      isOwner: true,
      firstName: 'Ada',
      lastName: null,
    };
    const member = {
      ...org,
      username: 'bob',
      email: 'bob@acme.example',
      role: 'member' as const,
      isOwner: false,
      firstName: null,
      lastName: null,
    };
    // Keycloak 26 drops attributes its user profile does not declare: a second look still knows its users.
    for (const user of [owner, member, owner, member]) assert.deepEqual(await fx.platform.ensureUser(ctx, user), { state: 'done' });
    const groupsOf = async (username: string) => {
      const admin = new KeycloakAdmin(fx.config.identity);
      const found = await admin.findUser(org.organization, username);
      return (await admin.userGroups(org.organization, found?.id ?? '')).map((g) => g.name).sort();
    };
    assert.deepEqual(await groupsOf('ada'), ['org-admin']);
    assert.deepEqual(await groupsOf('bob'), ['user']);
    assert.deepEqual(await fx.platform.ensureUser(ctx, { ...member, role: 'admin' }), { state: 'done' });
    assert.deepEqual(await groupsOf('bob'), ['org-admin'], 'promoted: org-admin, and no longer user');
    assert.deepEqual(await fx.platform.ensureUser(ctx, { ...member, lastName: 'Builder' }), { state: 'done' });
    assert.deepEqual(await groupsOf('bob'), ['user'], 'demoted again');
    const bob = await new KeycloakAdmin(fx.config.identity).findUser(org.organization, 'bob');
    assert.deepEqual([bob?.email, bob?.lastName], ['bob@acme.example', 'Builder'], 'an update keeps what it does not change');
    if (!fx.kube || !fx.keycloak) return;
    assert.deepEqual([...(fx.keycloak.realms.get(org.organization)?.users.values() ?? [])].map((u) => u.username).sort(), [
      'ada',
      'admin',
      'bob',
    ]);
    assert.equal(
      (fx.kube.get('kube-dc.com/v1', 'Organization', org.organization, org.organization).spec as { email: string }).email,
      `platform+${org.organization}@tenantry.invalid`,
      "the Organization's email stays the realm admin's, never the owner's",
    );
  });

  test("an owner whose email is the realm admin's is refused, naming the address", async () => {
    const clash = await fx.platform.ensureUser(ctx, {
      ...org,
      username: 'eve',
      email: `platform+${org.organization}@tenantry.invalid`,
      role: 'member',
      isOwner: false,
      firstName: null,
      lastName: null,
    });
    assert.equal(clash.state === 'failed' && clash.code, 'UPSTREAM_409');
    assert.match(clash.state === 'failed' ? clash.message : '', /admin user \(TENANTRY_ORGANIZATION_EMAIL\)/);
  });

  test('a realm user Tenantry did not make is neither taken over nor deleted', async () => {
    // Someone made carol in the realm themselves (Kube-DC's console, an administrator).
    const admin = new KeycloakAdmin(fx.config.identity);
    await admin.createUser(org.organization, { username: 'carol', email: 'carol@elsewhere.example', enabled: true });
    const carol = {
      ...org,
      username: 'carol',
      email: 'carol@acme.example',
      role: 'admin' as const,
      isOwner: false,
      firstName: null,
      lastName: null,
    };
    const refused = await fx.platform.ensureUser(ctx, carol);
    assert.equal(refused.state === 'failed' && refused.code, 'UPSTREAM_409');
    assert.deepEqual(await fx.platform.deleteUser(ctx, carol), { state: 'done' });
    const still = await admin.findUser(org.organization, 'carol');
    assert.equal(still?.email, 'carol@elsewhere.example', 'her account and email are untouched');
    assert.deepEqual(await admin.userGroups(org.organization, still?.id ?? ''), [], 'and she joined no group');
  });

  test('console login: pending required actions first, then a one-time login minted by the identity provider', async (t) => {
    if (!fx.keycloak) return t.skip('sets required actions through the identity-provider double');
    fx.keycloak.setRequiredActions(org.organization, 'ada', ['VERIFY_EMAIL', 'UPDATE_PASSWORD']);
    assert.deepEqual(await fx.platform.prepareConsoleLogin(ctx, { ...org, username: 'ada' }), {
      state: 'action_required',
      actions: ['VERIFY_EMAIL', 'UPDATE_PASSWORD'],
    });
    fx.keycloak.setRequiredActions(org.organization, 'ada', []);
    const grant = await fx.platform.prepareConsoleLogin(ctx, { ...org, username: 'ada' });
    assert.equal(grant.state, 'ready');
    const key = new URL(grant.state === 'ready' ? (grant.url ?? '') : '').searchParams.get('impersonation') ?? '';
    assert.equal(fx.keycloak.logins.get(key)?.userId, fx.keycloak.user(org.organization, 'ada')?.id, 'the URL logs in that user');
  });

  test('a project: a range from the pool (the same on every repeat), the Project, its backing namespace', async () => {
    const range = await fx.platform.reserveAddressRange(ctx, project);
    assert.equal(range.state, 'done');
    const cidr = range.state === 'done' ? range.cidr : '';
    assert.deepEqual(await fx.platform.reserveAddressRange(ctx, project), { state: 'done', cidr });
    const seen = await drive(fx, () => fx.platform.ensureProject(ctx, { ...project, cidr }));
    assert.deepEqual(seen.at(-1), { state: 'done' });
    if (!fx.kube) return;
    assert.equal(cidr, '10.100.0.0/24');
    const object = fx.kube.get('kube-dc.com/v1', 'Project', 'web', org.organization);
    assert.deepEqual(object.spec, { cidrBlock: cidr, egressNetworkType: 'cloud' });
    assert.ok(fx.kube.tryGet('v1', 'Namespace', project.namespace));
  });

  test('quota: the plan on the Organization, the customer quota as an HRQ, a project cap as a ResourceQuota', async () => {
    const quota = {
      planId: 'pro-pool',
      quota: { vcpu: 8, memory_gib: 32, storage_gib: 200, gpus: { 'nvidia-a10': 1 } },
      projectCaps: { web: { vcpu: 2 } },
    };
    assert.deepEqual(await fx.platform.applyQuota(ctx, org, quota), { state: 'done' });
    assert.deepEqual(await fx.platform.applyQuota(ctx, org, { ...quota, quota: { ...quota.quota, gpus: {} } }), { state: 'done' });
    const unknown = await fx.platform.applyQuota(ctx, org, { ...quota, quota: { ...quota.quota, gpus: { 'nvidia-h100': 1 } } });
    assert.equal(unknown.state === 'failed' && unknown.code, 'PROVISIONING_FAILED');
    if (!fx.kube) return;
    const hrq = fx.kube.get('hnc.x-k8s.io/v1alpha2', 'HierarchicalResourceQuota', 'tenantry-quota', org.organization);
    assert.deepEqual(
      (hrq.spec as { hard: object }).hard,
      { 'requests.cpu': '8', 'requests.memory': '32Gi', 'requests.storage': '200Gi' },
      'the GPU line went with the GPU grant',
    );
    assert.equal(
      fx.kube.get('kube-dc.com/v1', 'Organization', org.organization, org.organization).metadata.annotations?.[
        'billing.kube-dc.com/plan-id'
      ],
      'pro-pool',
    );
    // Under Kube-DC's admission: the plan change went through as the plan writer; `project-quota` is Kube-DC's.
    assert.deepEqual((fx.kube.get('v1', 'ResourceQuota', 'tenantry-project-cap', project.namespace).spec as { hard: object }).hard, {
      'requests.cpu': '2',
    });
    assert.equal(fx.kube.tryGet('v1', 'ResourceQuota', 'project-quota', project.namespace), undefined);
  });

  test('workloads: suspend stops what runs (marked), resume starts only that, GPUs are read from running VMs', async (t) => {
    const kube = fx.kube;
    if (!kube) return t.skip('creates VMs and databases through the Kubernetes double');
    const gpuTemplate = { spec: { domain: { devices: { gpus: [{ name: 'g', deviceName: 'nvidia.com/GA102GL_A10' }] } } } };
    kube.create({
      apiVersion: VM[0],
      kind: VM[1],
      metadata: { name: 'api', namespace: project.namespace },
      spec: { runStrategy: 'Always', template: gpuTemplate },
    });
    kube.create({
      apiVersion: VM[0],
      kind: VM[1],
      metadata: { name: 'old', namespace: project.namespace },
      spec: { runStrategy: 'Halted' },
    });
    kube.create({
      apiVersion: 'db.kube-dc.com/v1alpha1',
      kind: 'KdcDatabase',
      metadata: { name: 'db', namespace: project.namespace },
      spec: { engine: 'postgresql' },
    });
    await fx.settle();
    const listed = await fx.platform.listWorkloads(ctx, org);
    assert.deepEqual(listed, {
      vms: [`${project.namespace}/api`, `${project.namespace}/old`],
      databases: [`${project.namespace}/db`],
      gpus: { 'nvidia-a10': 1 },
      running: true,
      halted: [`${project.namespace}/old`],
    });
    assert.equal(workloadsRunning(listed), 2, 'the VM halted by its owner does not count as running');
    assert.deepEqual(await fx.platform.gpuUsage(ctx, org), { 'nvidia-a10': 1 });
    const stopped = await fx.platform.stopWorkloads(ctx, org);
    assert.equal(workloadsRunning(stopped), 0);
    assert.deepEqual(await fx.platform.gpuUsage(ctx, org), {});
    assert.equal(kube.get(...VM, 'api', project.namespace).metadata.annotations?.['tenantry.io/stopped-by-suspend'], 'Always');
    assert.equal(kube.get('postgresql.cnpg.io/v1', 'Cluster', 'db', project.namespace).metadata.annotations?.['cnpg.io/hibernation'], 'on');
    assert.equal(workloadsRunning(await fx.platform.stopWorkloads(ctx, org)), 0, 'a repeated stop changes nothing');
    const started = await fx.platform.startWorkloads(ctx, org);
    assert.equal(workloadsRunning(started), 2, 'what the suspension stopped runs again; the halted VM is not counted');
    assert.equal(
      (kube.get(...VM, 'old', project.namespace).spec as { runStrategy: string }).runStrategy,
      'Halted',
      'what was stopped before suspend stays stopped',
    );
    assert.equal((kube.get(...VM, 'api', project.namespace).spec as { runStrategy: string }).runStrategy, 'Always');
    assert.equal(kube.get(...VM, 'api', project.namespace).metadata.annotations?.['tenantry.io/stopped-by-suspend'], undefined);
    await fx.settle();
    assert.equal(
      (kube.get('db.kube-dc.com/v1alpha1', 'KdcDatabase', 'db', project.namespace).status as { readyInstances: number }).readyInstances,
      2,
    );
  });

  test('deletion: the project first (range released once its namespace is gone), then the organization and namespace', async () => {
    const seen = await drive(fx, () => fx.platform.deleteProject(ctx, project));
    assert.deepEqual(seen.at(-1), { state: 'done' });
    assert.ok(seen.length > 1, 'done is not reported while the project is still there');
    assert.deepEqual(await fx.platform.deleteUser(ctx, { ...org, username: 'bob' }), { state: 'done' });
    assert.deepEqual(await fx.platform.deleteUser(ctx, { ...org, username: 'nobody' }), { state: 'done' });
    const gone = await drive(fx, () => fx.platform.deleteOrganization(ctx, org));
    assert.deepEqual(gone.at(-1), { state: 'done' });
    assert.deepEqual(await fx.platform.deleteOrganization(ctx, org), { state: 'done' }, 'a repeat after the end is done');
    if (!fx.kube || !fx.keycloak) return;
    assert.equal(fx.kube.tryGet('v1', 'Namespace', org.organization), undefined);
    assert.equal(fx.kube.tryGet('v1', 'Namespace', project.namespace), undefined);
    assert.equal(fx.keycloak.realms.has(org.organization), false, "Kube-DC's controller took its realm away with it");
    assert.deepEqual(fx.kube.list('v1', 'ConfigMap', 'tenantry'), [], 'no range reservation or user record stays');
  });
});

test('preflight of a real Kube-DC cluster and Keycloak: the CRDs are installed and the admin client is accepted', {
  skip: REAL_CLUSTER
    ? false
    : 'no cluster: set TENANTRY_TEST_KUBECONFIG, TENANTRY_TEST_IDP_URL and TENANTRY_TEST_IDP_CLIENT_SECRET to run this file against one (it ran on the doubles above)',
}, async () => {
  const fixture = await startKubernetesFixture();
  try {
    // Through discovery, which every identity may read: the driver's own has no right to read CRDs.
    const groups = (await fixture.kubeConfig.makeApiClient(ApisApi).getAPIVersions()).groups.map((g) => g.name);
    for (const group of ['kube-dc.com', 'kubevirt.io', 'hnc.x-k8s.io', 'cdi.kubevirt.io']) assert.ok(groups.includes(group), group);
    assert.equal(await new KeycloakAdmin(fixture.config.identity).realmExists(fixture.config.identity.adminRealm), true);
  } finally {
    await fixture.close();
  }
});
