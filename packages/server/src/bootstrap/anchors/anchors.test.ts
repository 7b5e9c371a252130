import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { FakeHosts } from '../../../test/anchor-hosts.ts';
import { GOOD_CONFIG, seedClusterConfig, seedKubeOvn, seedNodes, startCluster } from '../../../test/bootstrap-clusters.ts';
import { eventually } from '../../../test/endpoint-fixture.ts';
import { assertGolden } from '../../../test/golden.ts';
import type { KubeApi } from '../../../test/kube-api/index.ts';
import { ManualScheduler, systemScheduler } from '../../infra/scheduler.ts';
import type { BootstrapKube } from '../kube.ts';
import { EXIT, memoryIo } from '../output.ts';
import { type AnchorOptions, anchorsApply, doctorAnchors } from './commands.ts';
import { jobName, renderUnit } from './job.ts';

const BRIDGE = 'br-ext-cloud';
const UNIT = '/etc/systemd/system/tenantry-anchor.service';
const ENABLED = '/etc/systemd/system/multi-user.target.wants/tenantry-anchor.service';

describe('bootstrap anchors apply and doctor anchors', () => {
  let kube: KubeApi;
  let client: BootstrapKube;
  let hosts: FakeHosts;

  const options = (extra: Partial<AnchorOptions> = {}): AnchorOptions => ({
    namespace: 'kube-system',
    image: 'busybox:1.36.1',
    bridgeTimeoutSeconds: 5,
    timeoutSeconds: 60,
    pollMs: 10,
    scheduler: systemScheduler,
    ...extra,
  });

  beforeEach(async () => {
    ({ kube, client } = await startCluster());
    seedNodes(kube);
    seedKubeOvn(kube);
    seedClusterConfig(kube, GOOD_CONFIG);
    hosts = await FakeHosts.create();
    kube.runJobs(hosts.runner());
    for (const node of ['cp-1', 'cp-2', 'cp-3']) await hosts.bridge(node, BRIDGE, { addresses: ['100.65.0.250/16'] });
  });
  afterEach(() => kube.close());

  const jobsLeft = () => kube.list('batch/v1', 'Job', 'kube-system').map((j) => j.metadata.name);

  test('--dry-run prints the plan and the exact Jobs, and creates nothing', async () => {
    const io = memoryIo();
    assert.equal(await anchorsApply(client, options({ dryRun: true }), io), EXIT.ok);
    assert.equal(kube.requests((r) => r.resource === 'jobs' && r.verb === 'create').length, 0);
    assert.ok(
      io.stdout.startsWith(
        'NODE  ANCHOR          INTERFACE     JOB\ncp-1  100.65.0.11/16  br-ext-cloud  kube-system/tenantry-anchor-apply-cp-1\n',
      ),
    );
    await assertGolden('bootstrap/anchors-apply-dry-run.txt', io.stdout);
    const jsonIo = memoryIo();
    assert.equal(await anchorsApply(client, options({ dryRun: true, json: true }), jsonIo), EXIT.ok);
    await assertGolden('bootstrap/anchors-apply-dry-run.json', jsonIo.stdout);
    const plan = JSON.parse(jsonIo.stdout) as { plan: Array<{ job: { spec: { template: { spec: Record<string, unknown> } } } }> };
    const pod = plan.plan[0]?.job.spec.template.spec as {
      nodeName: string;
      hostNetwork: boolean;
      containers: Array<{ securityContext: { capabilities: { add: string[]; drop: string[] }; runAsUser: number } }>;
    };
    assert.equal(pod.nodeName, 'cp-1');
    assert.equal(pod.hostNetwork, true);
    assert.deepEqual(pod.containers[0]?.securityContext.capabilities, { drop: ['ALL'], add: ['NET_ADMIN'] });
  });

  test('apply binds every anchor persistently, removes its Jobs, and a second run changes nothing', async () => {
    await hosts.bridge('cp-3', BRIDGE, { addresses: ['100.65.0.250/16', '100.65.0.13/16'] }); // bound by hand earlier
    const io = memoryIo();
    assert.equal(await anchorsApply(client, options(), io), EXIT.ok);
    for (const [node, ip] of [
      ['cp-1', '100.65.0.11'],
      ['cp-2', '100.65.0.12'],
      ['cp-3', '100.65.0.13'],
    ] as const) {
      assert.ok((await hosts.addresses(node, BRIDGE)).includes(`${ip}/16`), `${node} has ${ip}/16`);
      assert.equal(await hosts.file(node, UNIT), `${renderUnit(BRIDGE, `${ip}/16`, 5)}\n`);
      assert.match((await hosts.file(node, '/etc/tenantry/anchor-bind')) ?? '', /ip addr replace "\$ADDRESS" dev "\$IFACE"/);
    }
    assert.deepEqual(
      await hosts.addresses('cp-3', BRIDGE),
      ['100.65.0.250/16', '100.65.0.13/16'],
      'an address already bound is left alone',
    );
    assert.deepEqual(jobsLeft(), [], 'the Jobs that succeeded are deleted');
    assert.equal(io.progressLines[0], 'anchors apply: 0 of 3 nodes done; cp-1: starting, cp-2: starting, cp-3: starting');
    assert.equal(io.progressLines.at(-1), 'anchors apply: 3 of 3 nodes done');
    await assertGolden('bootstrap/anchors-apply.txt', io.stdout);

    const again = memoryIo();
    assert.equal(await anchorsApply(client, options(), again), EXIT.ok);
    assert.match(again.stdout, /cp-1 {2}100\.65\.0\.11\/16 {2}br-ext-cloud {2}ok {6}already bound; unit unchanged and enabled/);
    assert.deepEqual(await hosts.addresses('cp-1', BRIDGE), ['100.65.0.250/16', '100.65.0.11/16']);
  });

  test("the enable link is systemd's own (a reboot runs the unit)", async () => {
    await anchorsApply(client, options(), memoryIo());
    const { readlink } = await import('node:fs/promises');
    assert.equal(await readlink(`${hosts.root}/nodes/cp-1${ENABLED}`), UNIT);
  });

  test('one node failing does not stop the others: its bridge never appears', async () => {
    await hosts.remove('cp-2', `net/${BRIDGE}`);
    const io = memoryIo();
    assert.equal(await anchorsApply(client, options({ bridgeTimeoutSeconds: 3 }), io), EXIT.findings);
    assert.match(
      io.stdout,
      /cp-2 {2}100\.65\.0\.12\/16 {2}br-ext-cloud {2}failed {2}bridge br-ext-cloud did not appear within 3s \(exit 1\); see kubectl -n kube-system logs job\/tenantry-anchor-apply-cp-2\n/,
    );
    assert.match(io.stdout, /cp-1 .* ok /);
    assert.match(io.stdout, /cp-3 .* ok /);
    assert.match(io.stdout, /1 of 3 nodes failed/);
    assert.deepEqual(jobsLeft(), ['tenantry-anchor-apply-cp-2'], 'the failed Job is kept for its logs');
    // Persistence was written before the wait: the unit binds it at the next boot, once the bridge exists.
    assert.ok(await hosts.file('cp-2', UNIT));
  });

  test('waits for a bridge that appears late, and replaces the address bound with another prefix', async () => {
    await hosts.bridge('cp-1', BRIDGE, { addresses: ['100.65.0.11/24'] });
    await hosts.remove('cp-2', `net/${BRIDGE}`);
    await hosts.bridge('cp-2', BRIDGE, { appearsAfter: 2 });
    assert.equal(await anchorsApply(client, options(), memoryIo()), EXIT.ok);
    assert.deepEqual(await hosts.addresses('cp-1', BRIDGE), ['100.65.0.11/16']);
    assert.deepEqual(await hosts.addresses('cp-2', BRIDGE), ['100.65.0.12/16']);
  });

  test('a finished Job of an earlier run is replaced; one still running is refused for its node only', async () => {
    kube.create({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'tenantry-anchor-apply-cp-1', namespace: 'kube-system' },
      spec: {},
    });
    // The Job double fails it (its pod has no script): an earlier run's Job that has ended.
    const ended = () =>
      (kube.get('batch/v1', 'Job', 'tenantry-anchor-apply-cp-1', 'kube-system').status as { conditions?: unknown[] } | undefined)
        ?.conditions;
    await eventually(() => ended() !== undefined, 'the earlier Job has ended');
    kube.create({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'tenantry-anchor-apply-cp-2', namespace: 'kube-system' },
      spec: { template: { spec: { nodeName: 'cp-2', containers: [{ name: 'x', command: ['sh', '-c', 'exit 0'] }] } } },
      status: {},
    });
    hosts.stuck.set('cp-2', 'ErrImagePull');
    await eventually(
      () => kube.list('v1', 'Pod', 'kube-system').some((p) => p.metadata.name?.startsWith('tenantry-anchor-apply-cp-2')),
      'the running Job has its pod',
    );
    const io = memoryIo();
    assert.equal(await anchorsApply(client, options(), io), EXIT.findings);
    assert.match(io.stdout, /cp-1 .* ok /);
    assert.match(
      io.stdout,
      /cp-2 .* failed {2}a Job kube-system\/tenantry-anchor-apply-cp-2 from another run is still running; wait for it or delete it/,
    );
    assert.match(io.stdout, /cp-3 .* ok /);
  });

  test('a pod that never starts times out with what it waits for (virtual time)', async () => {
    hosts.stuck.set('cp-3', 'ImagePullBackOff');
    const scheduler = new ManualScheduler();
    const io = memoryIo();
    const run = anchorsApply(client, options({ scheduler, timeoutSeconds: 30 }), io);
    let settled = false;
    void run.finally(() => {
      settled = true;
    });
    while (!settled) {
      await scheduler.advance(1000);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal(await run, EXIT.findings);
    assert.match(
      io.stdout,
      /cp-3 .* failed {2}did not finish within 30s \(pod waiting: ImagePullBackOff \(Back-off pulling image\)\); the Job kube-system\/tenantry-anchor-apply-cp-3 is left for inspection/,
    );
    assert.ok(io.progressLines.some((l) => l.includes('cp-3: pod waiting: ImagePullBackOff')));
  });

  test('doctor anchors: healthy after apply (exit 0), table and JSON', async () => {
    assert.equal(await anchorsApply(client, options(), memoryIo()), EXIT.ok);
    const io = memoryIo();
    assert.equal(await doctorAnchors(client, options(), io), EXIT.ok);
    await assertGolden('bootstrap/doctor-anchors-healthy.txt', io.stdout);
    const jsonIo = memoryIo();
    assert.equal(await doctorAnchors(client, options({ json: true }), jsonIo), EXIT.ok);
    await assertGolden('bootstrap/doctor-anchors-healthy.json', jsonIo.stdout);
    assert.deepEqual(jobsLeft(), []);
    // The check changes nothing on the nodes.
    assert.deepEqual(await hosts.addresses('cp-1', BRIDGE), ['100.65.0.250/16', '100.65.0.11/16']);
  });

  test('doctor anchors: drift (an address gone, a unit gone, a stale unit) and collisions are exit 1', async () => {
    assert.equal(await anchorsApply(client, options(), memoryIo()), EXIT.ok);
    await hosts.setAddresses('cp-2', BRIDGE, ['100.65.0.250/16']); // someone ran ip addr del
    await hosts.remove('cp-3', ENABLED); // systemctl disable
    // cp-1 also holds cp-3's anchor and a router port's address (a hand-bound leftover).
    await hosts.setAddresses('cp-1', BRIDGE, ['100.65.0.11/16', '100.65.0.13/16', '100.65.0.101/16']);
    const io = memoryIo();
    assert.equal(await doctorAnchors(client, options(), io), EXIT.findings);
    await assertGolden('bootstrap/doctor-anchors-drift.txt', io.stdout);
    const jsonIo = memoryIo();
    await doctorAnchors(client, options({ json: true }), jsonIo);
    const report = JSON.parse(jsonIo.stdout) as {
      healthy: boolean;
      nodes: Array<{ node: string; status: string; bound: string; enabled: string; collisions: string[] }>;
    };
    assert.equal(report.healthy, false);
    assert.deepEqual(
      report.nodes.map((n) => [n.node, n.status, n.bound, n.enabled, n.collisions.length]),
      [
        ['cp-1', 'drift', 'yes', 'yes', 2],
        ['cp-2', 'drift', 'no', 'yes', 0],
        ['cp-3', 'drift', 'yes', 'no', 1],
      ],
    );
  });

  test('doctor anchors: a broken rule is exit 2 and nothing runs on the nodes', async () => {
    seedClusterConfig(kube, { ...GOOD_CONFIG, EXT_NET_ANCHOR_IPS: 'cp-1=100.65.0.101,cp-2=100.65.0.12,worker-1=100.65.0.21' });
    const io = memoryIo();
    assert.equal(await doctorAnchors(client, options(), io), EXIT.badInput);
    await assertGolden('bootstrap/doctor-anchors-bad-input.txt', io.stdout);
    assert.equal(await anchorsApply(client, options(), memoryIo()), EXIT.badInput);
    assert.equal(hosts.runs.length, 0);
  });

  test('an interface name that is not one is bad input', async () => {
    const io = memoryIo();
    assert.equal(await anchorsApply(client, options({ interface: 'br-ext cloud', dryRun: true }), io), EXIT.badInput);
    assert.match(io.stdout, /readable +--interface +"br-ext cloud" is not a network interface name/);
  });

  test('Job names fit in a label for any node name', () => {
    assert.equal(jobName('apply', 'cp-1'), 'tenantry-anchor-apply-cp-1');
    const long = jobName('check', 'control-plane-1.rack-17.eu-west.dc.example.com');
    assert.ok(long.length <= 63, long);
    assert.match(long, /^tenantry-anchor-check-control-plane-1-rack-17-eu-west-dc-[0-9a-f]{6}$/);
    assert.notEqual(jobName('check', 'a.b'), jobName('check', 'a-b'));
  });
});
