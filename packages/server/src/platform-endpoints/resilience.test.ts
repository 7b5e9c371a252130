import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { endpointAnnotations, endpointWorld, eventually } from '../../test/endpoint-fixture.ts';

const NS = 'kube-system';
const SERVICE = 'kube-api-platform';

describe('endpoint manager: watches, API errors, removal', () => {
  const worlds: Array<{ close(): Promise<void> }> = [];
  after(async () => {
    for (const w of worlds) await w.close();
  });

  test('a dropped watch is re-listed after a backoff: a change made while it was down is acted on', async () => {
    const world = await endpointWorld(['apiserver', 'apiserver', 'apiserver']);
    worlds.push(world);
    world.createService(SERVICE, NS, endpointAnnotations(world.nodes[0]?.port ?? 0));
    const manager = world.startManager('manager-a');
    await world.scheduler.runDue();
    await eventually(() => world.ready(SERVICE, NS)?.length === 3, 'three ready');
    const lists = () => world.kube.requests((r) => r.resource === 'services' && r.verb === 'list').length;
    const listsBefore = lists();

    // The API server drops every watch and refuses the next list; meanwhile the annotation is removed.
    world.kube.faults.failNext({ status: 503, match: (r) => r.resource === 'services' && r.verb === 'list' });
    assert.ok(world.kube.dropWatches() >= 3);
    const annotations = { ...endpointAnnotations(0), 'tenantry.io/backend-source': null };
    world.kube.patch('v1', 'Service', SERVICE, NS, { metadata: { annotations } });
    await eventually(() => world.kube.openWatches === 0, 'watches closed');

    // Backoff 1 s (±20%), then a failed list, then 2 s: the manager lists again and sees the change.
    for (let i = 0; i < 10 && manager.endpoints.length > 0; i++) {
      await world.scheduler.advance(1000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await eventually(() => manager.endpoints.length === 0, 'the endpoint dropped');
    assert.ok(lists() >= listsBefore + 2, 'one failed list, one good one');
    await eventually(() => world.slice(SERVICE, NS) === undefined, 'the slice deleted');
    assert.ok(world.events(SERVICE, NS).length > 0);

    // Probing has stopped: a minute of rounds reaches no node.
    const probes = world.nodes.map((n) => n.seen.length);
    await world.scheduler.advance(60_000);
    assert.deepEqual(
      world.nodes.map((n) => n.seen.length),
      probes,
    );
    await eventually(() => world.kube.openWatches >= 3, 'watching again');
  });

  test('a watch resumed from a compacted version (410) lists again; a failed slice write is retried next round', async () => {
    const world = await endpointWorld(['apiserver', 'apiserver', 'apiserver']);
    worlds.push(world);
    world.createService(SERVICE, NS, endpointAnnotations(world.nodes[0]?.port ?? 0));
    const manager = world.startManager('manager-a', { watchTimeoutSeconds: 1 });
    await world.scheduler.runDue();
    await eventually(() => world.ready(SERVICE, NS)?.length === 3, 'three ready');

    // The server ends the watches (timeoutSeconds) after the history was compacted: resuming gets 410.
    world.kube.compact();
    const listsBefore = world.kube.requests((r) => r.verb === 'list').length;
    const gone = () =>
      world.kube.log.filter((r) => r.verb === 'watch' && Number(r.query.get('resourceVersion')) < world.kube.store.resourceVersion).length;
    // Resuming and re-listing are scheduled with no delay: run what is due until every watch has listed again.
    const deadline = Date.now() + 10_000;
    while (world.kube.requests((r) => r.verb === 'list').length < listsBefore + 3) {
      assert.ok(Date.now() < deadline, 'listed again after 410');
      await world.scheduler.runDue();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(gone() >= 3, 'the watches resumed from the old version first');

    // cp-3 stops; the first write of the new slice fails with a 500 and is retried on the next round.
    await world.nodes[2]?.stop();
    world.kube.faults.failNext({ status: 500, match: (r) => r.resource === 'endpointslices' && r.verb === 'update' });
    await world.scheduler.advance(10_000);
    assert.deepEqual(world.ready(SERVICE, NS), ['cp-1', 'cp-2', 'cp-3'], 'the write failed');
    await world.scheduler.advance(5000);
    assert.deepEqual(world.ready(SERVICE, NS), ['cp-1', 'cp-2']);
    assert.equal((await manager.metrics.apiErrors.get()).values.find((v) => v.labels.operation === 'endpointslice')?.value, 1);

    // Someone else edits the slice: the manager's stale write conflicts, it reads the slice again and wins.
    await world.nodes[2]?.start(world.nodes[2].port);
    const slice = world.kube.get('discovery.k8s.io/v1', 'EndpointSlice', `${SERVICE}-mgr`, NS);
    world.kube.update({ ...slice, metadata: { ...slice.metadata, annotations: { touched: 'yes' } } });
    await world.scheduler.advance(5000);
    assert.deepEqual(world.ready(SERVICE, NS), ['cp-1', 'cp-2', 'cp-3']);
    assert.ok(world.kube.requests((r) => r.resource === 'endpointslices' && r.status === 409).length >= 1);
  });

  test('deleting the Service (disabling the endpoint) removes the slice and stops probing', async () => {
    const world = await endpointWorld(['apiserver', 'apiserver', 'apiserver']);
    worlds.push(world);
    world.createService(SERVICE, NS, endpointAnnotations(world.nodes[0]?.port ?? 0));
    const manager = world.startManager('manager-a');
    await world.scheduler.runDue();
    await eventually(() => world.ready(SERVICE, NS)?.length === 3, 'three ready');
    world.kube.delete('v1', 'Service', SERVICE, NS);
    assert.equal(world.slice(SERVICE, NS), undefined, 'collected with its owner');
    await eventually(() => manager.endpoints.length === 0, 'the endpoint dropped');
    const probes = world.nodes.map((n) => n.seen.length);
    await world.scheduler.advance(60_000);
    assert.deepEqual(
      world.nodes.map((n) => n.seen.length),
      probes,
    );
    // An orphan left by an earlier run (annotation removed while no manager ran) is cleaned on the next full list.
    world.kube.create({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'old-mgr',
        namespace: NS,
        labels: { 'kubernetes.io/service-name': 'old', 'endpointslice.kubernetes.io/managed-by': 'endpoint-manager.tenantry.io' },
      },
      addressType: 'IPv4',
      endpoints: [],
    });
    await world.scheduler.advance(300_000);
    await eventually(() => world.kube.tryGet('discovery.k8s.io/v1', 'EndpointSlice', 'old-mgr', NS) === undefined, 'the orphan deleted');
  });

  test('invalid annotations: a Warning event naming the annotation, no probing', async () => {
    const world = await endpointWorld(['apiserver', 'apiserver', 'apiserver']);
    worlds.push(world);
    world.createService(SERVICE, NS, endpointAnnotations(world.nodes[0]?.port ?? 0, { 'tenantry.io/health-interval-seconds': 'often' }));
    world.startManager('manager-a');
    await world.scheduler.runDue();
    await eventually(() => world.events(SERVICE, NS).length === 1, 'the warning');
    assert.deepEqual(world.events(SERVICE, NS)[0]?.reason, 'InvalidSettings');
    assert.match(world.events(SERVICE, NS)[0]?.message ?? '', /tenantry\.io\/health-interval-seconds must be a whole number/);
    await world.scheduler.advance(20_000);
    assert.ok(world.nodes.every((n) => n.seen.length === 0));
    assert.equal(world.slice(SERVICE, NS), undefined);
  });
});
