import assert from 'node:assert/strict';
import { test } from 'node:test';
import { endpointAnnotations, endpointWorld, eventually } from '../../test/endpoint-fixture.ts';
import type { EndpointManager } from './manager.ts';

const NS = 'kube-system';
const SERVICE = 'kube-api-platform';

test('two managers: one leader writes; failover after a crash, a partition and a graceful stop; never two leaders', async () => {
  const world = await endpointWorld(['apiserver', 'apiserver', 'apiserver']);
  try {
    world.createService(SERVICE, NS, endpointAnnotations(world.nodes[0]?.port ?? 0));
    const a = world.startManager('manager-a');
    await world.scheduler.runDue();
    const b = world.startManager('manager-b');
    await world.scheduler.runDue();
    await eventually(() => world.ready(SERVICE, NS)?.length === 3, 'three ready');
    assert.ok(a.isLeader());
    assert.ok(!b.isLeader());

    const managers: EndpointManager[] = [a, b];
    /** Moves time in steps, checking at each that at most one manager acts as leader. */
    const run = async (ms: number, until?: () => boolean): Promise<number> => {
      let elapsed = 0;
      while (elapsed < ms && !until?.()) {
        await world.scheduler.advance(250);
        elapsed += 250;
        assert.ok(managers.filter((m) => m.isLeader()).length <= 1, `two leaders at +${elapsed} ms`);
      }
      return elapsed;
    };
    const sliceWriters = () =>
      world.kube
        .requests((r) => r.resource === 'endpointslices' && ['create', 'update', 'delete'].includes(r.verb) && r.status < 300)
        .map((r) => r.user);

    await run(20_000);
    assert.deepEqual(sliceWriters(), ['manager-a'], 'only the leader wrote, once');
    assert.equal(world.nodes[0]?.seen.length, 5, 'only the leader probes (5 rounds in 20 s)');

    // kill -9 of the leader: the lease stays held until it expires.
    await a.stop(false);
    const failover = await run(30_000, () => b.isLeader());
    assert.ok(b.isLeader());
    process.stdout.write(`# failover after the leader died: ${failover} ms (lease 15 s, retry 2 s)\n`);
    assert.ok(failover >= 13_000 && failover <= 17_500, `failover ${failover} ms`);
    const lease = world.kube.get('coordination.k8s.io/v1', 'Lease', 'tenantry-endpoint-manager', NS) as unknown as {
      spec: { holderIdentity: string; leaseTransitions: number };
    };
    assert.deepEqual([lease.spec.holderIdentity, lease.spec.leaseTransitions], ['manager-b', 1]);
    await world.nodes[0]?.stop();
    await run(10_000);
    assert.deepEqual(world.ready(SERVICE, NS), ['cp-2', 'cp-3']);
    assert.deepEqual(sliceWriters(), ['manager-a', 'manager-b'], 'the new leader carried on from the slice and wrote the change');

    // A third replica; then the leader is cut off from the API: it stops acting before the other takes over.
    const c = world.startManager('manager-c');
    managers.push(c);
    await run(1000);
    world.kube.faults.failNext({ count: 1_000_000, status: 503, match: (r) => r.user === 'manager-b' });
    let bStepDown = -1;
    let cTakeOver = -1;
    for (let elapsed = 250; elapsed <= 30_000 && cTakeOver < 0; elapsed += 250) {
      await world.scheduler.advance(250);
      assert.ok(!(b.isLeader() && c.isLeader()), `two leaders at +${elapsed} ms`);
      if (bStepDown < 0 && !b.isLeader()) bStepDown = elapsed;
      if (cTakeOver < 0 && c.isLeader()) cTakeOver = elapsed;
    }
    process.stdout.write(`# partitioned leader stopped acting after ${bStepDown} ms; the other took over after ${cTakeOver} ms\n`);
    assert.ok(bStepDown > 0 && bStepDown <= 10_250 && cTakeOver > bStepDown, `${bStepDown} < ${cTakeOver}`);
    await world.nodes[0]?.start(world.nodes[0].port);
    await run(6000);
    assert.deepEqual(world.ready(SERVICE, NS), ['cp-1', 'cp-2', 'cp-3']);
    assert.equal(sliceWriters().at(-1), 'manager-c');

    // The partition heals; the leader stops gracefully and hands the lease over at once.
    world.kube.faults.clear();
    await run(3000);
    await c.stop(true);
    const handover = await run(10_000, () => b.isLeader());
    process.stdout.write(`# handover after a graceful stop: ${handover} ms\n`);
    assert.ok(handover <= 2250, `handover ${handover} ms`);
  } finally {
    await world.close();
  }
});
