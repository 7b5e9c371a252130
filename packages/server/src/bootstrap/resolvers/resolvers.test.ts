import assert from 'node:assert/strict';
import { afterEach, before, beforeEach, describe, test } from 'node:test';
import {
  ensureNamespace,
  GOOD_CONFIG,
  GOOD_VALUES,
  KUBE_OVN_COREFILE,
  seedClusterConfig,
  startCluster,
  tempDir,
  writeTemp,
} from '../../../test/bootstrap-clusters.ts';
import { eventually } from '../../../test/endpoint-fixture.ts';
import { assertGolden } from '../../../test/golden.ts';
import type { DeploymentController } from '../../../test/kube-api/controllers.ts';
import type { KubeApi } from '../../../test/kube-api/index.ts';
import { ManualScheduler, systemScheduler } from '../../infra/scheduler.ts';
import { RESOLVER_SELECTOR } from '../defaults.ts';
import type { BootstrapKube } from '../kube.ts';
import { EXIT, memoryIo } from '../output.ts';
import { CONFIG_ANNOTATION, type ResolverOptions, resolvers } from './commands.ts';

const LABELS = { 'ovn.kubernetes.io/vpc-dns': 'true' };

/** A per-project resolver as Kube-OVN generates it: vpc-dns-<name>, 2 replicas, mounting a Corefile ConfigMap. */
function resolver(kube: KubeApi, namespace: string, name: string, configMap: string): void {
  kube.create({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels: LABELS },
    spec: {
      replicas: 2,
      selector: { matchLabels: { 'k8s-app': name } },
      template: {
        metadata: { labels: { 'k8s-app': name } },
        spec: {
          containers: [{ name: 'coredns', image: 'coredns/coredns:1.12.1', args: ['-conf', '/etc/coredns/Corefile'] }],
          volumes: [{ name: 'config-volume', configMap: { name: configMap, items: [{ key: 'Corefile', path: 'Corefile' }] } }],
        },
      },
    },
  });
}

function corefile(kube: KubeApi, namespace: string, name: string): string {
  return String((kube.get('v1', 'ConfigMap', name, namespace).data as Record<string, string>).Corefile);
}

describe('bootstrap resolvers apply and remove', () => {
  let kube: KubeApi;
  let client: BootstrapKube;
  let rollouts: DeploymentController;
  let values: string;

  before(async () => {
    values = await writeTemp(await tempDir('resolvers'), 'values.yaml', GOOD_VALUES);
  });

  const options = (extra: Partial<ResolverOptions> = {}): ResolverOptions => ({
    values: [values],
    selector: RESOLVER_SELECTOR,
    corefileConfigMaps: ['kube-system/vpc-dns-corefile'],
    ttl: 30,
    timeoutSeconds: 60,
    pollMs: 10,
    scheduler: systemScheduler,
    ...extra,
  });

  const settled = () =>
    kube
      .list('apps/v1', 'Deployment')
      .every((d) => (d.status as { observedGeneration?: number; updatedReplicas?: number } | undefined)?.updatedReplicas === 2);

  beforeEach(async () => {
    ({ kube, client } = await startCluster());
    rollouts = kube.runDeployments({ stepMs: 2 });
    seedClusterConfig(kube, GOOD_CONFIG);
    ensureNamespace(kube, 'tenant-x');
    kube.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'vpc-dns-corefile', namespace: 'kube-system' },
      data: { Corefile: KUBE_OVN_COREFILE },
    });
    kube.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'p3-corefile', namespace: 'tenant-x' },
      data: { Corefile: KUBE_OVN_COREFILE },
    });
    resolver(kube, 'kube-system', 'vpc-dns-p1', 'vpc-dns-corefile');
    resolver(kube, 'kube-system', 'vpc-dns-p2', 'vpc-dns-corefile');
    resolver(kube, 'tenant-x', 'vpc-dns-p3', 'p3-corefile');
    // Not a resolver: never touched.
    kube.create({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: 'tenant-x' },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [] } },
      },
    });
    await eventually(settled, 'the first rollouts are done');
  });
  afterEach(() => kube.close());

  const patches = () => kube.requests((r) => r.resource === 'deployments' && r.verb === 'patch');

  test('apply patches every resolver configuration, restarts each resolver and waits for its rollout', async () => {
    const io = memoryIo();
    assert.equal(await resolvers(client, 'apply', options(), io), EXIT.ok);
    for (const [ns, name] of [
      ['kube-system', 'vpc-dns-corefile'],
      ['tenant-x', 'p3-corefile'],
    ] as const) {
      assert.match(
        corefile(kube, ns, name),
        /100\.65\.0\.30 kube-api\.example\.com\n {8}100\.65\.0\.31 login\.example\.com backend\.example\.com console\.example\.com billing\.example\.com s3\.example\.com grafana\.example\.com\n {8}ttl 30\n {8}fallthrough\n/,
      );
    }
    assert.deepEqual(
      rollouts.completed
        .filter((c) => c.generation === 2)
        .map((c) => c.key)
        .sort(),
      ['kube-system/vpc-dns-p1', 'kube-system/vpc-dns-p2', 'tenant-x/vpc-dns-p3'],
    );
    const web = kube.get('apps/v1', 'Deployment', 'web', 'tenant-x');
    assert.equal(web.metadata.generation, 1, 'a Deployment outside the selector is left alone');
    const p1 = kube.get('apps/v1', 'Deployment', 'vpc-dns-p1', 'kube-system') as unknown as {
      spec: { template: { metadata: { annotations: Record<string, string> } } };
    };
    assert.match(p1.spec.template.metadata.annotations[CONFIG_ANNOTATION] ?? '', /^[0-9a-f]{16}$/);
    assert.equal(
      io.progressLines[0],
      'resolvers: 0 of 3 rolled out; kube-system/vpc-dns-p1: restarting, kube-system/vpc-dns-p2: restarting, tenant-x/vpc-dns-p3: restarting',
    );
    assert.equal(io.progressLines.at(-1), 'resolvers: 3 of 3 rolled out');
    await assertGolden('bootstrap/resolvers-apply.txt', io.stdout);

    const again = memoryIo();
    const before = patches().length;
    assert.equal(await resolvers(client, 'apply', options({ json: true }), again), EXIT.ok);
    assert.equal(patches().length, before, 'nothing changed, so nothing restarts');
    const report = JSON.parse(again.stdout) as {
      configMaps: Array<{ outcome: string }>;
      resolvers: Array<{ rollout: string; restarted: boolean }>;
    };
    assert.deepEqual(
      report.configMaps.map((c) => c.outcome),
      ['unchanged', 'unchanged'],
    );
    assert.deepEqual(
      report.resolvers.map((r) => [r.restarted, r.rollout]),
      [
        [false, 'not needed'],
        [false, 'not needed'],
        [false, 'not needed'],
      ],
    );
  });

  test('remove takes the names out, keeps fallthrough, restarts, and says to wait 5 minutes', async () => {
    assert.equal(await resolvers(client, 'apply', options(), memoryIo()), EXIT.ok);
    const io = memoryIo();
    assert.equal(await resolvers(client, 'remove', options(), io), EXIT.ok);
    const text = corefile(kube, 'kube-system', 'vpc-dns-corefile');
    assert.doesNotMatch(text, /example\.com/);
    assert.match(text, / {4}hosts \{\n {8}ttl 30\n {8}fallthrough\n {4}\}/);
    assert.equal(rollouts.completed.filter((c) => c.generation === 3).length, 3);
    assert.match(io.stdout, /Wait at least 5 minutes before verifying/);
    await assertGolden('bootstrap/resolvers-remove.txt', io.stdout);
  });

  test('--dry-run prints the entries and each change, and writes nothing', async () => {
    const io = memoryIo();
    assert.equal(await resolvers(client, 'apply', options({ dryRun: true }), io), EXIT.ok);
    assert.equal(kube.requests((r) => r.verb === 'update' || r.verb === 'patch').length, 0);
    assert.equal(corefile(kube, 'kube-system', 'vpc-dns-corefile'), KUBE_OVN_COREFILE);
    await assertGolden('bootstrap/resolvers-apply-dry-run.txt', io.stdout);
  });

  test('a rollout that does not finish times out (virtual time); the others complete; exit 1', async () => {
    rollouts.hold('kube-system', 'vpc-dns-p2');
    const scheduler = new ManualScheduler();
    const io = memoryIo();
    const run = resolvers(client, 'apply', options({ scheduler, timeoutSeconds: 120 }), io);
    let done = false;
    void run.finally(() => {
      done = true;
    });
    while (!done) {
      await scheduler.advance(1000);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal(await run, EXIT.findings);
    assert.match(io.stdout, /kube-system\/vpc-dns-p2 .* timed out after 120s \(0 of 2 new replicas updated\)/);
    assert.match(io.stdout, /kube-system\/vpc-dns-p1 .* done/);
    assert.match(io.stdout, /1 failed; fix them and run the command again/);
  });

  test('a rollout past its progress deadline fails at once', async () => {
    rollouts.fail('tenant-x', 'vpc-dns-p3');
    const io = memoryIo();
    assert.equal(await resolvers(client, 'apply', options(), io), EXIT.findings);
    assert.match(io.stdout, /tenant-x\/vpc-dns-p3 .* failed: exceeded its progress deadline/);
  });

  test('a write that races another writer is redone on what that writer wrote', async () => {
    kube.faults.conflictNextWrite((r) => r.resource === 'configmaps' && r.name === 'p3-corefile');
    const io = memoryIo();
    assert.equal(await resolvers(client, 'apply', options(), io), EXIT.ok);
    assert.match(corefile(kube, 'tenant-x', 'p3-corefile'), /100\.65\.0\.30 kube-api\.example\.com/);
    assert.equal(kube.requests((r) => r.resource === 'configmaps' && r.name === 'p3-corefile' && r.verb === 'update').length, 2);
  });

  test('a resolver that mounts no Corefile is reported and not restarted', async () => {
    resolver(kube, 'tenant-x', 'vpc-dns-p4', 'missing-corefile');
    await eventually(settled, 'its first rollout is done');
    const io = memoryIo();
    assert.equal(await resolvers(client, 'apply', options(), io), EXIT.findings);
    assert.match(io.stdout, /tenant-x\/vpc-dns-p4 +- +no +mounts no ConfigMap with a Corefile key/);
  });

  test('bad input changes nothing: both switches off is exit 2', async () => {
    seedClusterConfig(kube, { ...GOOD_CONFIG, PLATFORM_ENDPOINT_KUBE_API_ENABLED: 'false', PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED: 'no' });
    const io = memoryIo();
    assert.equal(await resolvers(client, 'apply', options(), io), EXIT.badInput);
    assert.match(io.stdout, /PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED +"no" is not true or false/);
    assert.equal(kube.requests((r) => r.verb === 'update' || r.verb === 'patch').length, 0);
  });
});
