import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DRIVER_USER } from '../../../test/kube-dc-cluster.ts';
import { context, drive, type KubernetesFixture, REAL_CLUSTER, startKubernetesFixture } from '../../../test/kubernetes-platform.ts';
import type { Progress } from '../platform.ts';

const ctx = context('p-res');
const STEP = fileURLToPath(new URL('../../../test/fixtures/kubernetes-driver-step.ts', import.meta.url));

/** Waits for a condition caused by real traffic (never to prove that nothing happened). */
async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 20));
  }
}

describe('kubernetes platform: restarts, conflicts, concurrency and deletion order', {
  skip: REAL_CLUSTER && 'injects faults into the doubles: runs without TENANTRY_TEST_KUBECONFIG',
}, () => {
  let fx: KubernetesFixture;
  before(async () => {
    fx = await startKubernetesFixture({ addressPool: ['10.100.0.0/20'] });
  });
  after(() => fx.close());

  test('kill -9 between platform calls: a new process continues from the cluster state, nothing made twice', async () => {
    const kube = fx.kube;
    const keycloak = fx.keycloak;
    assert.ok(kube && keycloak);
    const org = { customerId: 'killed', organization: 'res-killed', displayName: 'Killed', planId: 'dev-pool' };
    const kubeconfig = await kube.writeKubeconfig(join(tmpdir(), `tenantry-kill9-${process.pid}.kubeconfig`), DRIVER_USER);
    // The process gets as far as creating the Organization, and dies while that request is on the wire.
    kube.faults.delay(3000, { count: 1, match: (r) => r.verb === 'create' && r.resource === 'organizations' });
    const child = spawn(process.execPath, [STEP], {
      env: {
        ...process.env,
        TENANTRY_TEST_STEP: JSON.stringify({ config: fx.config, kubeconfig, ctx: { partnerId: ctx.partnerId, mode: ctx.mode }, org }),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await until(() => kube.requests((r) => r.verb === 'create' && r.resource === 'organizations').length === 1, 'the Organization create');
    child.kill('SIGKILL');
    await new Promise((ok) => child.once('exit', ok));
    assert.ok(kube.tryGet('v1', 'Namespace', org.organization), 'the killed process had made the namespace');
    assert.equal(keycloak.realms.has(org.organization), false, 'no realm yet: Kube-DC makes it with the Organization');

    const restarted = fx.restart();
    const seen = await drive(fx, () => restarted.ensureOrganization(ctx, org));
    assert.deepEqual(seen.at(-1), { state: 'done' });
    assert.equal(
      kube.requests((r) => r.verb === 'create' && r.resource === 'namespaces' && r.name === undefined && r.status === 201).length >= 1,
      true,
    );
    assert.equal(kube.list('kube-dc.com/v1', 'Organization', org.organization).length, 1);
    assert.ok(keycloak.realms.has(org.organization), "Kube-DC's controller made its realm");
    assert.equal(keycloak.log.filter((r) => r.method === 'POST' && r.path === '/admin/realms').length, 0, 'the driver made no realm');
    rmSync(kubeconfig, { force: true });
  });

  test('a conflict on every write: each write is sent again and every step finishes, with nothing duplicated', async () => {
    const kube = fx.kube;
    assert.ok(kube);
    const org = { customerId: 'busy', organization: 'res-busy' };
    const project = { ...org, project: 'app', namespace: 'res-busy-app' };
    // Every distinct write (verb, resource, object) loses to a concurrent writer the first time it is sent.
    const conflictedOnce = new Set<string>();
    let conflicts = 0;
    kube.faults.failNext({
      count: Number.POSITIVE_INFINITY,
      status: 409,
      reason: 'Conflict',
      match: (r) => {
        if (!['create', 'update', 'patch'].includes(r.verb)) return false;
        const key = `${r.verb} ${r.resource} ${r.namespace ?? ''} ${r.name ?? ''}`;
        if (conflictedOnce.has(key)) return false;
        conflictedOnce.add(key);
        conflicts += 1;
        return true;
      },
    });
    const states: string[] = [];
    const conflicted = async (step: () => Promise<Progress>) => {
      const seen = await drive(fx, step, 60);
      states.push(...seen.map((p) => (p.state === 'unavailable' ? `unavailable ${p.reason}` : p.state)));
      return seen.at(-1);
    };
    assert.deepEqual(await conflicted(() => fx.platform.ensureOrganization(ctx, { ...org, displayName: null, planId: 'dev-pool' })), {
      state: 'done',
    });
    const owner = {
      ...org,
      username: 'own',
      email: 'own@busy.example',
      role: 'admin' as const,
      isOwner: true,
      firstName: null,
      lastName: null,
    };
    assert.deepEqual(await conflicted(() => fx.platform.ensureUser(ctx, owner)), { state: 'done' });
    const range = await fx.platform.reserveAddressRange(ctx, project);
    assert.equal(range.state, 'done');
    const cidr = range.state === 'done' ? range.cidr : '';
    assert.deepEqual(await conflicted(() => fx.platform.ensureProject(ctx, { ...project, cidr })), { state: 'done' });
    const quota = { planId: 'dev-pool', quota: { vcpu: 4, memory_gib: 8, storage_gib: 50, gpus: {} }, projectCaps: { app: { vcpu: 1 } } };
    assert.deepEqual(await conflicted(() => fx.platform.applyQuota(ctx, org, quota)), { state: 'done' });
    assert.deepEqual(await conflicted(() => fx.platform.deleteProject(ctx, project)), { state: 'done' });
    assert.deepEqual(await conflicted(() => fx.platform.deleteOrganization(ctx, org)), { state: 'done' });
    kube.faults.clear();
    assert.ok(conflicts >= 6, `every kind of write met a conflict (${conflicts})`);
    assert.deepEqual(
      states.filter((s) => s !== 'done' && s !== 'in_progress'),
      [],
      'each conflicted write was sent again within the step',
    );
    assert.equal(kube.requests((r) => r.verb === 'create' && r.resource === 'organizations' && r.status === 201).length >= 1, true);
    assert.equal(kube.tryGet('v1', 'Namespace', org.organization), undefined);
  });

  test('two processes reserving ranges at once never hand out the same one', async () => {
    const other = fx.restart();
    const refs = Array.from({ length: 4 }, (_, i) => ({
      customerId: 'race',
      organization: 'race',
      project: `p${i}`,
      namespace: `race-p${i}`,
    }));
    const results = await Promise.all(
      refs.flatMap((ref) => [fx.platform.reserveAddressRange(ctx, ref), other.reserveAddressRange(ctx, ref)]),
    );
    const byProject = new Map<string, string>();
    results.forEach((result, i) => {
      assert.equal(result.state, 'done');
      const ns = refs[Math.floor(i / 2)]?.namespace ?? '';
      const cidr = result.state === 'done' ? result.cidr : '';
      // Both processes asked for the same project: after settling, one range is kept for it.
      byProject.set(ns, byProject.get(ns) ?? cidr);
    });
    const kept = new Map<string, string>();
    for (const ref of refs) {
      const again = await fx.platform.reserveAddressRange(ctx, ref);
      kept.set(ref.namespace, again.state === 'done' ? again.cidr : '');
    }
    assert.equal(new Set(kept.values()).size, refs.length, 'one distinct range per project');
    const reservations = fx.kube?.list('v1', 'ConfigMap', 'tenantry', 'tenantry.io/organization=race') ?? [];
    assert.equal(reservations.length, refs.length, 'the losing duplicate reservations were released');
  });

  test('deletion order: projects, then the Organization (Kube-DC takes its realm), then the namespace; done only when all are gone', async () => {
    const kube = fx.kube;
    const keycloak = fx.keycloak;
    assert.ok(kube && keycloak);
    const org = { customerId: 'order', organization: 'res-order' };
    assert.deepEqual(
      (await drive(fx, () => fx.platform.ensureOrganization(ctx, { ...org, displayName: null, planId: 'dev-pool' }))).at(-1),
      { state: 'done' },
    );
    for (const name of ['a', 'b']) {
      const ref = { ...org, project: name, namespace: `res-order-${name}` };
      const range = await fx.platform.reserveAddressRange(ctx, ref);
      const cidr = range.state === 'done' ? range.cidr : '';
      assert.deepEqual((await drive(fx, () => fx.platform.ensureProject(ctx, { ...ref, cidr }))).at(-1), { state: 'done' });
    }
    const mark = kube.log.length;
    const realmMark = keycloak.log.length;
    const seen = await drive(fx, () => fx.platform.deleteOrganization(ctx, org));
    assert.deepEqual(seen.at(-1), { state: 'done' });
    assert.ok(seen.slice(0, -1).every((p) => p.state === 'in_progress'));
    const deletes = kube.log
      .slice(mark)
      .filter((r) => r.verb === 'delete' && r.status < 300)
      .map((r) => `${r.resource}/${r.name}`);
    const at = (entry: string) => deletes.indexOf(entry);
    assert.ok(at('projects/a') >= 0 && at('projects/b') >= 0);
    assert.ok(
      at('organizations/res-order') > Math.max(at('projects/a'), at('projects/b')),
      `Organization after its projects: ${deletes.join(', ')}`,
    );
    assert.ok(at('namespaces/res-order') > at('organizations/res-order'), 'the namespace last');
    assert.equal(
      keycloak.log.slice(realmMark).filter((r) => r.method === 'DELETE' && r.path.startsWith('/admin/realms')).length,
      0,
      "the driver deletes no realm: it is Kube-DC's",
    );
    assert.equal(keycloak.realms.has('res-order'), false, "Kube-DC's controller took it with the Organization");
    for (const kind of [
      ['kube-dc.com/v1', 'Project'],
      ['kube-dc.com/v1', 'Organization'],
    ] as const)
      assert.deepEqual(kube.list(kind[0], kind[1], org.organization), []);
    assert.equal(kube.tryGet('v1', 'Namespace', 'res-order-a'), undefined);
  });

  test('ranges are read from every page of the Projects list (more than one page of 500)', async () => {
    const small = await startKubernetesFixture({ addressPool: ['10.150.0.0/24'] });
    try {
      const kube = small.kube;
      assert.ok(kube);
      kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'filler' } });
      for (let i = 0; i < 520; i += 1)
        kube.create({
          apiVersion: 'kube-dc.com/v1',
          kind: 'Project',
          metadata: { name: `a${String(i).padStart(3, '0')}`, namespace: 'filler' },
          spec: { cidrBlock: `172.16.${i % 256}.0/24`, egressNetworkType: 'cloud' },
        });
      // Sorted last: on the second page of the list.
      kube.create({
        apiVersion: 'kube-dc.com/v1',
        kind: 'Project',
        metadata: { name: 'zzz', namespace: 'filler' },
        spec: { cidrBlock: '10.150.0.0/24', egressNetworkType: 'cloud' },
      });
      const range = await small.platform.reserveAddressRange(ctx, {
        customerId: 'pg',
        organization: 'pg',
        project: 'p',
        namespace: 'pg-p',
      });
      assert.equal(range.state === 'failed' && range.code, 'NO_ADDRESS_SPACE');
    } finally {
      await small.close();
    }
  });
});
