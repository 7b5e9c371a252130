import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { context, drive, type KubernetesFixture, REAL_CLUSTER, startKubernetesFixture } from '../../../test/kubernetes-platform.ts';
import { KeycloakAdmin } from './keycloak.ts';
import { createKubernetesPlatform } from './kubernetes-platform.ts';

const ctx = context('p-map');
let counter = 0;
const fresh = () => {
  counter += 1;
  return { customerId: `c${counter}`, organization: `map-c${counter}`, displayName: null, planId: 'dev-pool' };
};

/**
 * The failure mapping (docs/platform-kubernetes.md, "Failure codes"): every platform error becomes a code
 * of the failure vocabulary or `unavailable`, and the next look after a transient one carries on.
 */
describe('kubernetes platform: failure mapping', {
  skip: REAL_CLUSTER && 'injects faults into the doubles: runs without TENANTRY_TEST_KUBECONFIG',
}, () => {
  let fx: KubernetesFixture;
  before(async () => {
    fx = await startKubernetesFixture({ addressPool: ['10.200.0.0/23'] });
  });
  after(() => fx.close());

  const kubeCases: Array<[number, string]> = [
    [400, 'failed UPSTREAM_400'],
    [403, 'failed UPSTREAM_403'],
    [422, 'failed UPSTREAM_422'],
    [409, 'unavailable'],
    [429, 'unavailable'],
    [500, 'unavailable'],
    [502, 'unavailable'],
    [503, 'unavailable'],
    [504, 'unavailable'],
  ];
  for (const [status, expected] of kubeCases) {
    test(`the Kubernetes API answering ${status} to a write is ${expected}, and the step goes on afterwards`, async () => {
      const org = fresh();
      // A conflict is sent again at once (three times): only one that persists is unavailable.
      fx.kube?.faults.failNext({ status, count: status === 409 ? 3 : 1, match: (r) => r.verb === 'create' && r.resource === 'namespaces' });
      const first = await fx.platform.ensureOrganization(ctx, org);
      assert.equal(first.state === 'failed' ? `failed ${first.code}` : first.state, expected);
      if (status === 429) assert.equal(first.state === 'unavailable' && first.retryAfterMs, 10_000);
      assert.deepEqual((await drive(fx, () => fx.platform.ensureOrganization(ctx, org))).at(-1), { state: 'done' });
    });
  }

  const idpCases: Array<[number, string]> = [
    [403, 'failed UPSTREAM_403'],
    [400, 'failed UPSTREAM_400'],
    [503, 'unavailable'],
  ];
  for (const [status, expected] of idpCases) {
    test(`the identity provider answering ${status} is ${expected}`, async () => {
      const org = fresh();
      // Before it creates the Organization, the driver asks whether a realm of its name exists.
      fx.keycloak?.failNext({ status, match: (r) => r.method === 'GET' && r.path === `/admin/realms/${org.organization}` });
      const first = await fx.platform.ensureOrganization(ctx, org);
      assert.equal(first.state === 'failed' ? `failed ${first.code}` : first.state, expected);
    });
  }

  test('refused admin credentials are UPSTREAM_401; a platform nobody answers is unavailable', async () => {
    const wrong = createKubernetesPlatform(
      { ...fx.config, identity: { ...fx.config.identity, clientSecret: 'wrong' } },
      pino({ level: 'silent' }),
      fx.kubeConfig,
    );
    const refused = await wrong.ensureOrganization(ctx, fresh());
    assert.equal(refused.state === 'failed' && refused.code, 'UPSTREAM_401');
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((ok) => closed.close(() => ok()));
    const nobody = createKubernetesPlatform(
      { ...fx.config, identity: { ...fx.config.identity, url: `http://127.0.0.1:${port}` } },
      pino({ level: 'silent' }),
      fx.kubeConfig,
    );
    assert.equal((await nobody.ensureOrganization(ctx, fresh())).state, 'unavailable');
    const cluster = fx.kubeConfig.getCurrentCluster();
    const kc = fx.kube?.kubeConfig('tenantry-driver');
    if (kc && cluster) {
      kc.clusters = [{ ...cluster, server: `https://127.0.0.1:${port}` }];
      const noCluster = createKubernetesPlatform(fx.config, pino({ level: 'silent' }), kc);
      assert.equal((await noCluster.ensureOrganization(ctx, fresh())).state, 'unavailable');
      await assert.rejects(noCluster.listWorkloads(ctx, { customerId: 'x', organization: 'x' }), { name: 'PlatformUnavailableError' });
      assert.equal(await noCluster.gpuUsage(ctx, { customerId: 'x', organization: 'x' }), undefined);
    }
  });

  test("a VM whose cloud-init is past KubeVirt's inline limit is refused with a message saying so", async () => {
    const image = {
      osName: 'Windows 11',
      url: 'https://images.example/w11.qcow2',
      cloudUser: 'Administrator',
      firmware: 'efi' as const,
      machineType: 'q35',
      features: ['smm', 'tpm'],
      cloudInit: `#ps1\n${'Write-Host hello\n'.repeat(200)}`,
      bootOrder: ['disk'],
      additionalDisks: null,
    };
    const quota = { customer: { vcpu: 8, memory_gib: 16, storage_gib: 200 }, project: {} };
    const org = fresh();
    const refused = await fx.platform.createVm(ctx, {
      ...org,
      namespace: `${org.organization}-default`,
      name: 'w',
      vcpu: 2,
      memoryGib: 4,
      storageGib: 64,
      image,
      quota,
    });
    assert.equal(refused.state === 'refused' && refused.code, 'UPSTREAM_422');
    assert.match(refused.state === 'refused' ? refused.message : '', /is 3405 bytes; KubeVirt takes at most 2048 inline/);
  });

  test('a cluster that takes the connection but does not answer: each call gives up after its deadline', async () => {
    const slow = createKubernetesPlatform(fx.config, pino({ level: 'silent' }), fx.kubeConfig, { kubeTimeoutMs: 300 });
    fx.kube?.faults.delay(5_000, { count: 50 });
    try {
      // Each answer would come after 5 s: the 300 ms deadline ends the look first, as "no answer".
      assert.equal((await slow.ensureOrganization(ctx, fresh())).state, 'unavailable', 'a look ends as "no answer"');
      await assert.rejects(slow.listWorkloads(ctx, { customerId: 'x', organization: 'x' }), { name: 'PlatformUnavailableError' });
    } finally {
      fx.kube?.faults.clear();
    }
  });

  test('a reconcile Kube-DC reports as failed is PROVISIONING_FAILED with its message; a missing organization is UPSTREAM_NOT_FOUND', async () => {
    const org = fresh();
    fx.controller?.fail('Organization', org.organization, org.organization, 'realm quota exceeded');
    const seen = await drive(fx, () => fx.platform.ensureOrganization(ctx, org));
    const last = seen.at(-1);
    assert.equal(last?.state === 'failed' && last.code, 'PROVISIONING_FAILED');
    assert.match(last?.state === 'failed' ? last.message : '', /realm quota exceeded/);
    const missing = await fx.platform.ensureProject(ctx, {
      customerId: 'ghost',
      organization: 'ghost',
      project: 'p',
      namespace: 'ghost-p',
      cidr: '10.9.0.0/24',
    });
    assert.equal(missing.state === 'failed' && missing.code, 'UPSTREAM_NOT_FOUND');
    const user = await fx.platform.ensureUser(ctx, {
      customerId: 'ghost',
      organization: 'ghost',
      username: 'u',
      email: 'u@x.example',
      role: 'member',
      isOwner: false,
      firstName: null,
      lastName: null,
    });
    assert.equal(user.state === 'failed' && user.code, 'UPSTREAM_NOT_FOUND');
  });

  test('the pool runs out: NO_ADDRESS_SPACE; ranges of Projects Tenantry did not make are never handed out', async () => {
    fx.kube?.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'foreign' } });
    fx.kube?.create({
      apiVersion: 'kube-dc.com/v1',
      kind: 'Project',
      metadata: { name: 'theirs', namespace: 'foreign' },
      spec: { cidrBlock: '10.200.0.0/24', egressNetworkType: 'cloud' },
    });
    const ref = (n: number) => ({ customerId: 'pool', organization: 'pool', project: `p${n}`, namespace: `pool-p${n}` });
    assert.deepEqual(await fx.platform.reserveAddressRange(ctx, ref(1)), { state: 'done', cidr: '10.200.1.0/24' });
    const out = await fx.platform.reserveAddressRange(ctx, ref(2));
    assert.equal(out.state === 'failed' && out.code, 'NO_ADDRESS_SPACE');
  });

  test('an email another user of the realm has is UPSTREAM_409', async () => {
    const org = fresh();
    assert.deepEqual((await drive(fx, () => fx.platform.ensureOrganization(ctx, org))).at(-1), { state: 'done' });
    const user = { ...org, role: 'member' as const, isOwner: false, firstName: null, lastName: null };
    assert.deepEqual(await fx.platform.ensureUser(ctx, { ...user, username: 'one', email: 'same@x.example' }), { state: 'done' });
    const taken = await fx.platform.ensureUser(ctx, { ...user, username: 'two', email: 'same@x.example' });
    assert.equal(taken.state === 'failed' && taken.code, 'UPSTREAM_409');
  });

  test('usage: undefined without a metrics source or when it fails; resource-hours from Prometheus when it answers', async () => {
    const subject = { customerId: 'acme', organization: 'p-acme', since: new Date('2026-01-01T00:00:00Z'), until: null };
    const from = new Date('2026-01-01T00:00:00Z');
    const to = new Date('2026-01-01T02:00:00Z');
    assert.equal(await fx.platform.usage(ctx, [subject], from, to), undefined);
    const queries: string[] = [];
    let fail = false;
    const prometheus = createServer((request, response) => {
      const query = new URL(request.url ?? '/', 'http://x').searchParams.get('query') ?? '';
      queries.push(query);
      if (fail) return void response.writeHead(500).end();
      const value = query.includes('resource="cpu"') ? '240' : query.includes('resource="memory"') ? String(120 * 2 ** 30) : '0';
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: 'success', data: { resultType: 'vector', result: [{ metric: {}, value: [0, value] }] } }));
    });
    await new Promise<void>((ok) => prometheus.listen(0, '127.0.0.1', ok));
    const metricsUrl = `http://127.0.0.1:${(prometheus.address() as AddressInfo).port}`;
    const withMetrics = createKubernetesPlatform({ ...fx.config, metricsUrl }, pino({ level: 'silent' }), fx.kubeConfig);
    const totals = await withMetrics.usage(ctx, [subject], from, to);
    assert.deepEqual(totals?.get('acme'), { vcpu_hours: 240, memory_gib_hours: 120, storage_gib_hours: 0, gpu_hours: {} });
    assert.match(queries[0] ?? '', /label_kube_dc_com_organization="p-acme"/);
    assert.match(queries[0] ?? '', /\[7200s:60s\]/, 'the window is the customer part of [from, to)');
    fail = true;
    assert.equal(await withMetrics.usage(ctx, [subject], from, to), undefined);
    await new Promise<void>((ok) => prometheus.close(() => ok()));
  });

  test('an admin token the identity provider revoked is replaced once, without failing the step', async () => {
    const admin = new KeycloakAdmin(fx.config.identity);
    assert.equal(await admin.realmExists('master'), true);
    fx.keycloak?.revokeTokens();
    assert.equal(await admin.realmExists('master'), true);
  });
});
