import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { endpointAnnotations, endpointWorld, eventually } from '../../test/endpoint-fixture.ts';
import { serveManagerHttp } from './http.ts';

const NS = 'kube-system';
const GW_NS = 'envoy-gateway-system';

describe('endpoint manager: the cluster API endpoint', () => {
  const worlds: Array<{ close(): Promise<void> }> = [];
  after(async () => {
    for (const w of worlds) await w.close();
  });

  test('all healthy: every control-plane node in the slice, probed without SNI, one connection per probe', async () => {
    const world = await endpointWorld(['apiserver', 'apiserver', 'apiserver']);
    worlds.push(world);
    const port = world.nodes[0]?.port ?? 0;
    const service = world.createService('kube-api-platform', NS, endpointAnnotations(port));
    const manager = world.startManager('manager-a');
    await world.scheduler.runDue();
    assert.ok(manager.isLeader());
    await eventually(() => world.ready('kube-api-platform', NS) !== undefined, 'the slice');
    assert.deepEqual(world.ready('kube-api-platform', NS), ['cp-1', 'cp-2', 'cp-3'], 'the worker is not selected');

    const slice = world.slice('kube-api-platform', NS);
    assert.equal(slice?.metadata?.labels?.['kubernetes.io/service-name'], 'kube-api-platform');
    assert.equal(slice?.metadata?.labels?.['endpointslice.kubernetes.io/managed-by'], 'endpoint-manager.tenantry.io');
    assert.deepEqual(
      slice?.metadata?.ownerReferences?.map((o) => [o.kind, o.name, o.uid, o.controller]),
      [['Service', 'kube-api-platform', service.metadata.uid, true]],
    );
    assert.deepEqual(slice?.ports, [{ name: 'https', port: 6443, protocol: 'TCP' }]);
    assert.deepEqual(
      slice?.endpoints?.map((e) => [e.addresses[0], e.nodeName]),
      [
        ['127.0.0.2', 'cp-1'],
        ['127.0.0.3', 'cp-2'],
        ['127.0.0.4', 'cp-3'],
      ],
    );
    for (const node of world.nodes) {
      assert.ok(node.seen.length >= 1);
      for (const seen of node.seen) {
        assert.equal(seen.path, '/readyz');
        assert.equal(seen.servername, false, 'the cluster API is probed without SNI');
        assert.equal(seen.host, `${node.address}:${port}`);
      }
    }
    const reasons = world.events('kube-api-platform', NS).map((e) => e.reason);
    assert.equal(reasons.filter((r) => r === 'BackendHealthy').length, 3);
    assert.equal(reasons.filter((r) => r === 'EndpointsUpdated').length, 1);

    // Three more rounds with nothing changing: probes go on, each on a new connection, the slice is not rewritten.
    const version = world.slice('kube-api-platform', NS)?.metadata?.resourceVersion;
    const probesBefore = world.nodes.map((n) => n.seen.length);
    await world.scheduler.advance(15_000);
    assert.deepEqual(
      world.nodes.map((n) => n.seen.length),
      probesBefore.map((p) => p + 3),
    );
    for (const node of world.nodes) assert.equal(node.connections, node.seen.length, 'one TLS connection per probe');
    assert.equal(world.slice('kube-api-platform', NS)?.metadata?.resourceVersion, version, 'an unchanged set is not written');
    assert.equal(world.kube.requests((r) => r.resource === 'endpointslices' && (r.verb === 'update' || r.verb === 'create')).length, 1);

    const http = await serveManagerHttp(manager, '127.0.0.1', 0);
    try {
      const metrics = await (await fetch(`${http.url}/metrics`)).text();
      assert.match(metrics, /tenantry_endpoint_manager_leader 1/);
      assert.match(metrics, /tenantry_endpoint_slice_endpoints\{service="kube-system\/kube-api-platform"\} 3/);
      assert.match(metrics, /tenantry_endpoint_probe_total\{service="kube-system\/kube-api-platform",node="cp-2",result="success"\} 4/);
      assert.match(metrics, /tenantry_endpoint_probe_duration_seconds_count\{service="kube-system\/kube-api-platform",node="cp-1"\} 4/);
      assert.equal((await fetch(`${http.url}/healthz`)).status, 200);
      const ready = (await (await fetch(`${http.url}/readyz`)).json()) as { status: string; endpoints: string[] };
      assert.deepEqual(ready, { status: 'ready', leader: true, endpoints: ['kube-system/kube-api-platform'] });
    } finally {
      http.server.close();
    }
  });

  test('a node that stops leaves after two failed probes and returns on its first good one (times measured)', async () => {
    const world = await endpointWorld(['apiserver', 'apiserver', 'apiserver']);
    worlds.push(world);
    world.createService('kube-api-platform', NS, endpointAnnotations(world.nodes[0]?.port ?? 0));
    world.startManager('manager-a');
    await world.scheduler.runDue();
    await eventually(() => world.ready('kube-api-platform', NS)?.length === 3, 'three ready');
    const cp2 = world.nodes[1];
    assert.ok(cp2);
    const step = 100;
    const measured: Array<{ stopAfterRoundMs: number; leaveMs: number; returnMs: number }> = [];
    // Stop the node at three points of the 5 s probe cycle: just after a round, mid-way, just before the next.
    for (const offset of [100, 2500, 4900]) {
      await world.scheduler.advance(offset);
      await cp2.stop();
      let leaveMs = 0;
      while (world.ready('kube-api-platform', NS)?.includes('cp-2')) {
        await world.scheduler.advance(step);
        leaveMs += step;
        assert.ok(leaveMs <= 12_000, 'the node must leave within two intervals and a timeout');
      }
      assert.deepEqual(world.ready('kube-api-platform', NS), ['cp-1', 'cp-3']);
      await cp2.start(cp2.port);
      let returnMs = 0;
      while (!world.ready('kube-api-platform', NS)?.includes('cp-2')) {
        await world.scheduler.advance(step);
        returnMs += step;
        assert.ok(returnMs <= 5_000, 'the node must return within one interval');
      }
      measured.push({ stopAfterRoundMs: offset, leaveMs, returnMs });
      // Back in phase with the probe rounds (which run every 5 s from t=0).
      await world.scheduler.advance((5000 - (world.scheduler.nowMs() % 5000)) % 5000);
    }
    process.stdout.write(`# leave/return times (virtual clock, 5 s / 2 failures / 1 success): ${JSON.stringify(measured)}\n`);
    for (const m of measured) {
      // Two failures are needed: the second one comes between one and two intervals after the stop.
      assert.ok(m.leaveMs > 5000 && m.leaveMs <= 10_000, `leave ${m.leaveMs} ms`);
      assert.ok(m.returnMs > 0 && m.returnMs <= 5000, `return ${m.returnMs} ms`);
    }
    const events = world.events('kube-api-platform', NS);
    assert.equal(events.filter((e) => e.reason === 'BackendUnhealthy').length, 3);
    assert.match(
      events.find((e) => e.reason === 'BackendUnhealthy')?.message ?? '',
      /cp-2 \(127\.0\.0\.3\) failed 2 probe\(s\) in a row: .*ECONNREFUSED/,
    );
    assert.equal(events.find((e) => e.reason === 'BackendUnhealthy')?.type, 'Warning');
    assert.equal(events.filter((e) => e.reason === 'BackendHealthy').length, 6);
    assert.equal(events.filter((e) => e.reason === 'EndpointsUpdated').length, 7);
  });

  test('every node failing: an empty slice (the "connection refused to VIP" symptom)', async () => {
    const world = await endpointWorld(['unavailable', 'unavailable', 'unavailable']);
    worlds.push(world);
    world.createService('kube-api-platform', NS, endpointAnnotations(world.nodes[0]?.port ?? 0));
    world.startManager('manager-a');
    await world.scheduler.runDue();
    await world.scheduler.advance(5000);
    const slice = world.slice('kube-api-platform', NS);
    assert.ok(slice, 'the slice exists');
    assert.deepEqual(slice.endpoints, [], 'no ready backend');
    const events = world.events('kube-api-platform', NS);
    assert.equal(events.filter((e) => e.reason === 'BackendUnhealthy').length, 3);
    assert.match(events.find((e) => e.reason === 'BackendUnhealthy')?.message ?? '', /HTTP 503/);
    assert.match(events.find((e) => e.reason === 'EndpointsUpdated')?.message ?? '', /0 ready \(no healthy backend\)/);
  });
});

describe('endpoint manager: the edge gateway endpoint', () => {
  test('health.host of a TLS listener is healthy; a pass-through hostname is reset by every node and empties the slice', async () => {
    const world = await endpointWorld(['gateway', 'gateway', 'gateway'], ['console.example.test']);
    try {
      const port = world.nodes[0]?.port ?? 0;
      const gateway = (host: string) =>
        endpointAnnotations(port, {
          'tenantry.io/health-path': '/',
          'tenantry.io/health-host': host,
          'tenantry.io/health-status-max': '499',
        });
      world.createService('edge-gateway-platform', GW_NS, gateway('console.example.test'), 443);
      world.startManager('manager-a');
      await world.scheduler.runDue();
      await eventually(() => world.ready('edge-gateway-platform', GW_NS)?.length === 3, 'three ready');
      for (const node of world.nodes) {
        assert.equal(node.resets, 0);
        assert.deepEqual(node.seen[0], { path: '/', host: `console.example.test:${port}`, servername: 'console.example.test' });
      }

      // The operator points health.host at the cluster API host, a pass-through route: no TLS listener.
      world.kube.patch('v1', 'Service', 'edge-gateway-platform', GW_NS, {
        metadata: { annotations: { 'tenantry.io/health-host': 'kube.example.test' } },
      });
      const manager = world.managers[0];
      await eventually(
        () => manager?.settingsOf(`${GW_NS}/edge-gateway-platform`)?.health.host === 'kube.example.test',
        'the new host seen',
      );
      const seenBefore = world.nodes.map((n) => n.resets);
      await world.scheduler.advance(10_000);
      assert.deepEqual(world.ready('edge-gateway-platform', GW_NS), [], 'every probe is reset, every node leaves');
      assert.ok(world.nodes.every((n, i) => n.resets >= (seenBefore[i] ?? 0) + 2));
      const unhealthy = world.events('edge-gateway-platform', GW_NS).filter((e) => e.reason === 'BackendUnhealthy');
      assert.equal(unhealthy.length, 3);
      assert.match(unhealthy[0]?.message ?? '', /SNI kube\.example\.test\): ECONNRESET/);
    } finally {
      await world.close();
    }
  });
});
