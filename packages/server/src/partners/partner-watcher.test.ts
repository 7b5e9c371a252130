import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { assertError, issueKey, operatorApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { KubeApi } from '../../test/kube-api/index.ts';
import { installKubeDc } from '../../test/kube-api/kube-dc.ts';
import { systemScheduler } from '../infra/scheduler.ts';
import { PartnerWatcher } from './partner-watcher.ts';

const PARTNER = ['kube-dc.com/v1', 'Partner'] as const;

/** Waits for a change the watch brings (never used to prove that nothing happened). */
async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

for (const target of testDatabases()) {
  describe(`--watch-partners: Kube-DC Partner resources manage partners [${target.name}]`, () => {
    let server: TestServer;
    let kube: KubeApi;
    let watcher: PartnerWatcher;
    const partner = async (id: string) =>
      (await operatorApi<{ data: Record<string, unknown> }>(server, 'GET', `/partners/${id}`)).body.data;
    const resource = (name: string) => kube.get(...PARTNER, name, 'partners');

    before(async () => {
      server = await startTestServer(target);
      kube = await KubeApi.start();
      installKubeDc(kube);
      kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'partners' } });
      watcher = new PartnerWatcher({
        kubeConfig: kube.kubeConfig('tenantry'),
        namespace: 'partners',
        partners: server.services.partners,
        capacity: server.services.capacity,
        scheduler: systemScheduler,
        logger: pino({ level: 'silent' }),
      });
      watcher.start();
    });
    after(async () => {
      await watcher.stop();
      await kube.close();
      await server.stop();
    });

    test('a Partner applied with kubectl becomes a partner with its settings, and its status says so', async () => {
      kube.create({
        apiVersion: PARTNER[0],
        kind: PARTNER[1],
        metadata: { name: 'acme-cloud', namespace: 'partners' },
        spec: {
          displayName: 'Acme Cloud',
          scopes: ['customers:read', 'customers:write'],
          limits: {
            maxCustomers: 50,
            maxProjectsPerCustomer: 0,
            rateLimit: { requestsPerMinute: 600, burst: 100 },
            allowedGpuProfiles: [],
          },
          defaults: { planId: 'standard' },
        },
      });
      const applied = await until(
        () => partner('acme-cloud'),
        (p) => p?.managed_by === 'partners/acme-cloud',
        'the partner',
      );
      assert.deepEqual(applied.scopes, ['customers:read', 'customers:write']);
      assert.equal(applied.managed_by, 'partners/acme-cloud');
      assert.deepEqual(
        [(applied.limits as Record<string, number>).max_customers, (applied.limits as Record<string, number>).max_projects_per_customer],
        [50, 10_000],
        '0 projects per customer is unlimited',
      );
      assert.equal((applied.limits as Record<string, number>).rate_limit_per_minute, 600);
      const status =
        (await until(
          async () => resource('acme-cloud').status as Record<string, unknown> | undefined,
          (s) => s?.ready === true,
          'the status',
        )) ?? {};
      assert.deepEqual([status.customerCount, status.observedGeneration], [0, 1]);
      assert.equal((status.conditions as Array<{ reason: string }>)[0]?.reason, 'Applied');
    });

    test("Kube-DC's portalUrl, contactEmail and defaults.projectName are read; what Tenantry does not enforce is named in the status", async () => {
      kube.create({
        apiVersion: PARTNER[0],
        kind: PARTNER[1],
        metadata: { name: 'portal-cloud', namespace: 'partners' },
        spec: {
          displayName: 'Portal Cloud',
          portalUrl: 'https://portal.example.com/customers',
          contactEmail: 'ops@portal.example.com',
          defaults: { projectName: 'main', egressNetworkType: 'cloud' },
          limits: {
            capacity: { cpu: '64', pods: 500, publicIPs: 4, gpu: { 'a100-40gb': { shares: 4, memoryMiB: 20480 } } },
          },
        },
      });
      const applied = await until(
        () => partner('portal-cloud'),
        (p) => p?.managed_by === 'partners/portal-cloud',
        'the partner',
      );
      assert.deepEqual(
        [applied.portal_url, applied.contact_email, (applied.defaults as Record<string, unknown>).project],
        ['https://portal.example.com/customers', 'ops@portal.example.com', 'main'],
      );
      const status = await until(
        async () => resource('portal-cloud').status as { ready?: boolean; conditions?: { message: string }[] } | undefined,
        (st) => st?.ready === true,
        'the status',
      );
      const message = status?.conditions?.[0]?.message ?? '';
      for (const field of [
        'spec.limits.capacity.pods',
        'spec.limits.capacity.publicIPs',
        'spec.limits.capacity.gpu.a100-40gb.memoryMiB',
        'spec.defaults.egressNetworkType',
      ])
        assert.ok(message.includes(field), `the status names ${field}: ${message}`);
      // Managed here: the operator API refuses them.
      const refused = assertError(
        await operatorApi(server, 'PATCH', '/partners/portal-cloud', { body: { portal_url: null } }),
        409,
        'CONFLICT',
      );
      assert.deepEqual(refused.details?.fields, ['portal_url']);
    });

    test('the operator API refuses managed fields with 409 and says where to change them; keys and unmanaged fields stay here', async () => {
      const refused = await operatorApi(server, 'PATCH', '/partners/acme-cloud', {
        body: { display_name: 'Other', limits: { max_customers: 1 } },
      });
      assertError(refused, 409, 'CONFLICT');
      assert.match(
        String((refused.body as { error: { message: string } }).error.message),
        /kubectl edit partners\.kube-dc\.com acme-cloud -n partners/,
      );
      assertError(await operatorApi(server, 'POST', '/partners/acme-cloud/suspend'), 409, 'CONFLICT');
      assertError(await operatorApi(server, 'PUT', '/partners/acme-cloud/plans', { body: { plans: [] } }), 409, 'CONFLICT');
      const allowed = await operatorApi(server, 'PATCH', '/partners/acme-cloud', {
        body: { allow_private_webhooks: true, defaults: { grace_days: 3 } },
      });
      assert.equal(allowed.status, 200);
      assert.ok(await issueKey(server, 'acme-cloud'));
    });

    test('a change to the resource applies within seconds, suspension included, audited as the resource', async () => {
      kube.patch(...PARTNER, 'acme-cloud', 'partners', { spec: { displayName: 'Acme Cloud EU', suspended: true } });
      const changed = await until(
        () => partner('acme-cloud'),
        (p) => p?.status === 'suspended',
        'the suspension',
      );
      assert.equal(changed.display_name, 'Acme Cloud EU');
      const audit = (
        await operatorApi<{ data: Array<{ actor: string; action: string }> }>(server, 'GET', '/audit?partner=acme-cloud&limit=50')
      ).body.data;
      assert.ok(audit.some((e) => e.action === 'partner.suspend' && e.actor === 'kubernetes:partners/acme-cloud'));
      kube.patch(...PARTNER, 'acme-cloud', 'partners', { spec: { suspended: false } });
      await until(
        () => partner('acme-cloud'),
        (p) => p?.status !== 'suspended',
        'the resumption',
      );
    });

    test('a dropped watch: changes made while disconnected still arrive', async () => {
      const before = watcher.applied;
      await until(
        async () => kube.openWatches,
        (n) => n > 0,
        'an open watch',
      );
      kube.dropWatches('abrupt');
      kube.patch(...PARTNER, 'acme-cloud', 'partners', { spec: { scopes: ['customers:read'] } });
      const after = await until(
        () => partner('acme-cloud'),
        (p) => JSON.stringify(p?.scopes) === '["customers:read"]',
        'the change after the drop',
      );
      assert.equal(after.managed_by, 'partners/acme-cloud');
      // The partner's row is written before the watcher's own apply ends (its capacity and status follow).
      await until(
        async () => watcher.applied,
        (n) => n > before,
        "the watcher's apply",
      );
    });

    test('a resource Tenantry cannot apply gets Ready=False with the reason; nothing is created', async () => {
      kube.create({
        apiVersion: PARTNER[0],
        kind: PARTNER[1],
        metadata: { name: 'x', namespace: 'partners' },
        spec: { displayName: 'Too short' },
      });
      // A CPU quantity Tenantry could not read never gets this far: the Partner CRD's pattern refuses it.
      assert.throws(
        () =>
          kube.create({
            apiVersion: PARTNER[0],
            kind: PARTNER[1],
            metadata: { name: 'bad-cpu', namespace: 'partners' },
            spec: { displayName: 'Bad', limits: { capacity: { cpu: 'lots' } } },
          }),
        /spec\.limits\.capacity\.cpu: Invalid value: "lots": spec\.limits\.capacity\.cpu in body should match/,
      );
      // Blank to Tenantry, which trims it; the CRD's minLength of 1 lets it through.
      kube.create({
        apiVersion: PARTNER[0],
        kind: PARTNER[1],
        metadata: { name: 'blank-name', namespace: 'partners' },
        spec: { displayName: '   ' },
      });
      for (const name of ['x', 'blank-name']) {
        const status = await until(
          async () => resource(name).status as Record<string, unknown> | undefined,
          (s) => s?.ready === false,
          `${name}'s status`,
        );
        assert.equal((status?.conditions as Array<{ reason: string }> | undefined)?.[0]?.reason, 'InvalidSpec');
      }
      assert.equal((await operatorApi(server, 'GET', '/partners/blank-name')).status, 404);
    });

    test('deleting the resource leaves the partner with its keys, no longer managed', async () => {
      kube.delete(...PARTNER, 'acme-cloud', 'partners');
      await until(
        () => partner('acme-cloud'),
        (p) => p?.managed_by === null,
        'the release',
      );
      const edited = await operatorApi(server, 'PATCH', '/partners/acme-cloud', { body: { display_name: 'Acme (self-managed)' } });
      assert.equal(edited.status, 200);
    });
  });
}
