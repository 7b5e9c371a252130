import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  GOOD_CONFIG,
  seedClusterConfig,
  seedGateway,
  seedNodes,
  seedPlatformEndpoint,
  startCluster,
  tempDir,
  writeTemp,
} from '../../../test/bootstrap-clusters.ts';
import { assertGolden } from '../../../test/golden.ts';
import type { KubeApi } from '../../../test/kube-api/index.ts';
import { DEFAULT_DIAGNOSTIC_IMAGE, DEFAULT_WELL_KNOWN_PATH } from '../defaults.ts';
import type { BootstrapKube } from '../kube.ts';
import { BootstrapError, EXIT, memoryIo } from '../output.ts';
import { doctorTopology, type TopologyOptions } from './doctor.ts';

/** Each fixture seeds one cluster; its table and JSON output are compared with test/golden/bootstrap/topology-<name>.*. */
const FIXTURES: Record<string, { seed: (kube: KubeApi) => void; expect: [string, string, string] }> = {
  // 1:1 NAT upstream: a MetalLB VIP in the private external subnet; kubeadm's exclusion label on the control plane.
  'class-a': {
    seed: (kube) => {
      seedNodes(kube, { providerID: 'rke2://', excluded: true });
      seedGateway(kube, { type: 'LoadBalancer', loadBalancerClass: 'metallb.io/l2', ingressIp: '100.65.0.5' });
      seedClusterConfig(kube, { ...GOOD_CONFIG, INGRESS_ADDRESS_LAYER: 'lb-l2' });
    },
    expect: ['A', 'needed', 'medium'],
  },
  // Public addresses on the control-plane nodes, carried on the gateway Service (layer none).
  'class-b': {
    seed: (kube) => {
      seedNodes(kube, { external: '203.0.113.' });
      seedGateway(kube, { type: 'ClusterIP', externalIPs: ['203.0.113.11', '203.0.113.12', '203.0.113.13'] });
      seedClusterConfig(kube, { ...GOOD_CONFIG, INGRESS_ADDRESS_LAYER: 'none' });
    },
    expect: ['B', 'not-needed', 'high'],
  },
  // A cloud provider's load balancer in front of the gateway.
  'class-c': {
    seed: (kube) => {
      seedNodes(kube, { providerID: 'aws:///eu-west-1a/' });
      seedGateway(kube, { type: 'LoadBalancer', ingressHostname: 'a1b2c3d4.elb.eu-west-1.amazonaws.com' });
    },
    expect: ['C', 'not-needed', 'high'],
  },
  // The feature is on (class A judged) but the nodes are on a cloud and the gateway has no address: a tie.
  'ambiguous-tie': {
    seed: (kube) => {
      seedNodes(kube, { providerID: 'gce://tenantry/europe-west1-b/' });
      seedGateway(kube, { type: 'LoadBalancer' });
      seedPlatformEndpoint(kube, 'kube-api-platform', 'kube-system', '100.65.0.30');
      seedPlatformEndpoint(kube, 'edge-gateway-platform', 'envoy-gateway-system', '100.65.0.31');
    },
    expect: ['unknown', 'ambiguous', 'low'],
  },
  // The feature is on, yet the gateway's VIP is public: class B evidence against it (the disabling question).
  'feature-on-but-b': {
    seed: (kube) => {
      seedNodes(kube);
      seedGateway(kube, { type: 'LoadBalancer', loadBalancerClass: 'metallb.io/l2', ingressIp: '198.51.100.7' });
      seedPlatformEndpoint(kube, 'kube-api-platform', 'kube-system', '100.65.0.30');
      seedClusterConfig(kube, { ...GOOD_CONFIG, INGRESS_ADDRESS_LAYER: 'lb-l2' });
    },
    expect: ['B', 'not-needed', 'medium'],
  },
  // Two gateways, one behind a cloud load balancer and one on the nodes' public addresses: B and C agree.
  'b-and-c': {
    seed: (kube) => {
      seedNodes(kube, { external: '203.0.113.' });
      seedGateway(kube, { name: 'envoy-public-a', type: 'LoadBalancer', ingressHostname: 'lb-7.example.net' });
      seedGateway(kube, { name: 'envoy-public-b', type: 'ClusterIP', externalIPs: ['203.0.113.11'] });
    },
    expect: ['unknown', 'not-needed', 'medium'],
  },
  // Mid-bootstrap: no gateway yet, nothing to go on.
  empty: {
    seed: (kube) => {
      seedNodes(kube);
    },
    expect: ['unknown', 'ambiguous', 'low'],
  },
};

describe('bootstrap doctor topology', () => {
  let values: string;
  before(async () => {
    const dir = await tempDir('topology');
    values = await writeTemp(dir, 'values.yaml', 'platform:\n  hostnames:\n    login: login.example.com\n');
  });

  const options = (extra: Partial<TopologyOptions> = {}): TopologyOptions => ({
    values: [values],
    wellKnownPath: DEFAULT_WELL_KNOWN_PATH,
    image: DEFAULT_DIAGNOSTIC_IMAGE,
    projectNamespace: 'acme-default',
    ...extra,
  });

  for (const [name, fixture] of Object.entries(FIXTURES))
    describe(name, () => {
      let kube: KubeApi;
      let client: BootstrapKube;
      before(async () => {
        ({ kube, client } = await startCluster());
        fixture.seed(kube);
      });
      after(() => kube.close());

      test('table', async () => {
        const io = memoryIo();
        assert.equal(await doctorTopology(client, options(), io), EXIT.ok);
        const [cls, verdict, confidence] = fixture.expect;
        assert.match(io.stdout, new RegExp(`Class:\\s+${cls}[\\s(]`));
        assert.match(io.stdout, new RegExp(`Verdict:\\s+${verdict}\\n`));
        assert.match(io.stdout, new RegExp(`Confidence:\\s+${confidence}\\n`));
        // The manual test and the structural check come exactly when the verdict needs confirming.
        assert.equal(io.stdout.includes('Manual test (decision aid 3)'), confidence !== 'high');
        await assertGolden(`bootstrap/topology-${name}.txt`, io.stdout);
      });

      test('JSON', async () => {
        const io = memoryIo();
        assert.equal(await doctorTopology(client, options({ json: true }), io), EXIT.ok);
        const report = JSON.parse(io.stdout) as { class: string; verdict: string; confidence: string; signals: unknown[] };
        assert.deepEqual([report.class, report.verdict, report.confidence], fixture.expect);
        assert.ok(report.signals.length >= 7);
        await assertGolden(`bootstrap/topology-${name}.json`, io.stdout);
      });
    });

  test('the manual test is the exact command: project namespace, login host, 6-second timeout, the public address', async () => {
    const { kube, client } = await startCluster();
    try {
      FIXTURES['class-a']?.seed(kube);
      const io = memoryIo();
      await doctorTopology(client, options(), io);
      assert.match(
        io.stdout,
        /kubectl -n acme-default run tenantry-hairpin-check --rm -i --restart=Never --image=curlimages\/curl:8\.11\.1 --command -- \\/,
      );
      assert.match(
        io.stdout,
        /curl -sk -o \/dev\/null -m 6 -w 'HTTP %\{http_code\} after %\{time_total\}s\\n' --resolve "login\.example\.com:443:\$PUBLIC_IP" https:\/\/login\.example\.com\/realms\/master\/\.well-known\/openid-configuration/,
      );
      assert.match(io.stdout, /on control-plane node cp-1:\n {2}ip -4 -br addr show br-ext-cloud\n {2}ip -4 route get "\$PUBLIC_IP"/);
    } finally {
      await kube.close();
    }
  });

  test('a cluster that cannot be read is exit 3, whatever the verdict would be', async () => {
    const { kube, client } = await startCluster();
    try {
      seedNodes(kube);
      kube.faults.failNext({ status: 403, reason: 'Forbidden', message: 'nodes is forbidden', match: (r) => r.resource === 'nodes' });
      await assert.rejects(doctorTopology(client, options(), memoryIo()), (error: unknown) => {
        assert.ok(error instanceof BootstrapError);
        assert.equal(error.exitCode, EXIT.clusterUnreadable);
        assert.equal(error.message, 'cannot read nodes: HTTP 403: nodes is forbidden');
        return true;
      });
    } finally {
      await kube.close();
    }
  });

  test('a cluster configuration that cannot be read (forbidden) is a warning, not a failure', async () => {
    const { kube, client } = await startCluster();
    try {
      FIXTURES['class-b']?.seed(kube);
      kube.faults.failNext({ status: 403, message: 'configmaps is forbidden', match: (r) => r.resource === 'configmaps' });
      const io = memoryIo();
      assert.equal(await doctorTopology(client, options(), io), EXIT.ok);
      assert.match(
        io.stdout,
        /Warning: {5}the cluster configuration was not read \(cannot read the ConfigMap flux-system\/cluster-config: HTTP 403/,
      );
      assert.match(io.stdout, /Class: {7}B\n/);
    } finally {
      await kube.close();
    }
  });
});
