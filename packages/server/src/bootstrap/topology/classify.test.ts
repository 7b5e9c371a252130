import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Classification, classifyTopology } from './classify.ts';
import type { GatewayServiceFacts, NodeFacts, TopologyFacts } from './facts.ts';
import { type Confidence, type Signal, type TopologyClass, topologySignals } from './signals.ts';

const s = (hint: TopologyClass | null, confidence: Confidence | null, name = `${hint ?? 'info'}-${confidence ?? '-'}`): Signal => ({
  signal: name,
  detail: '',
  hint,
  confidence,
});

type Expected = Pick<Classification, 'class' | 'verdict' | 'confidence'> & { leaning?: TopologyClass };

// Each row: the hints of the evidence table, and what the verdict must be.
const TABLE: Array<[string, Signal[], Expected]> = [
  ['no evidence at all', [], { class: 'unknown', verdict: 'ambiguous', confidence: 'low' }],
  ['only informational rows', [s(null, null), s(null, null)], { class: 'unknown', verdict: 'ambiguous', confidence: 'low' }],
  ['B high alone', [s('B', 'high')], { class: 'B', verdict: 'not-needed', confidence: 'high' }],
  ['B high with B low', [s('B', 'high'), s('B', 'low'), s(null, null)], { class: 'B', verdict: 'not-needed', confidence: 'high' }],
  ['C high alone', [s('C', 'high')], { class: 'C', verdict: 'not-needed', confidence: 'high' }],
  ['C high with C medium', [s('C', 'high'), s('C', 'medium')], { class: 'C', verdict: 'not-needed', confidence: 'high' }],
  ['A medium alone (never high: the NAT is upstream)', [s('A', 'medium')], { class: 'A', verdict: 'needed', confidence: 'medium' }],
  ['A medium with A low', [s('A', 'medium'), s('A', 'low')], { class: 'A', verdict: 'needed', confidence: 'medium' }],
  ['B high against a C medium', [s('B', 'high'), s('C', 'medium')], { class: 'B', verdict: 'not-needed', confidence: 'medium' }],
  [
    'B high against A medium (the feature is on, the shape says B)',
    [s('B', 'high'), s('A', 'medium')],
    { class: 'B', verdict: 'not-needed', confidence: 'medium' },
  ],
  [
    'contradiction B high and C high: both say not needed',
    [s('B', 'high'), s('C', 'high')],
    { class: 'unknown', verdict: 'not-needed', confidence: 'medium' },
  ],
  ['contradiction A high and B high', [s('A', 'high'), s('B', 'high')], { class: 'unknown', verdict: 'ambiguous', confidence: 'low' }],
  [
    'contradiction A high and C high with more B',
    [s('A', 'high'), s('C', 'high'), s('B', 'low')],
    { class: 'unknown', verdict: 'ambiguous', confidence: 'low' },
  ],
  ['tie A medium and C medium', [s('A', 'medium'), s('C', 'medium')], { class: 'unknown', verdict: 'ambiguous', confidence: 'low' }],
  ['tie A medium and B medium', [s('A', 'medium'), s('B', 'medium')], { class: 'unknown', verdict: 'ambiguous', confidence: 'low' }],
  [
    'tie B medium and C medium: not needed either way',
    [s('B', 'medium'), s('C', 'medium')],
    { class: 'unknown', verdict: 'not-needed', confidence: 'medium' },
  ],
  [
    'tie by sums: C medium against two A lows',
    [s('C', 'medium'), s('A', 'low'), s('A', 'low')],
    { class: 'unknown', verdict: 'ambiguous', confidence: 'low' },
  ],
  ['A low alone is too weak', [s('A', 'low')], { class: 'unknown', verdict: 'ambiguous', confidence: 'low', leaning: 'A' }],
  [
    'A medium beats B low, but with dissent',
    [s('A', 'medium'), s('B', 'low')],
    { class: 'unknown', verdict: 'ambiguous', confidence: 'low', leaning: 'A' },
  ],
  [
    'two A mediums outweigh one B high: still too contested',
    [s('A', 'medium'), s('A', 'medium', 'a2'), s('B', 'high')],
    { class: 'unknown', verdict: 'ambiguous', confidence: 'low', leaning: 'A' },
  ],
  ['C medium alone', [s('C', 'medium')], { class: 'C', verdict: 'not-needed', confidence: 'medium' }],
];

describe('topology classification (pure)', () => {
  for (const [name, signals, expected] of TABLE)
    test(name, () => {
      const result = classifyTopology(signals);
      assert.deepEqual(
        {
          class: result.class,
          verdict: result.verdict,
          confidence: result.confidence,
          ...(result.leaning ? { leaning: result.leaning } : {}),
        },
        expected,
      );
      assert.ok(result.reasons.length > 0, 'a verdict always says why');
    });

  test('the reasons name the evidence on both sides', () => {
    const result = classifyTopology([s('B', 'high', 'gateway service x'), s('C', 'medium', 'cloud provider')]);
    assert.match(result.reasons.join(' '), /class B: gateway service x \(high\)/);
    assert.match(result.reasons.join(' '), /against it, class C: cloud provider \(medium\)/);
  });
});

const cp = (name: string, internal: string, extra: Partial<NodeFacts> = {}): NodeFacts => ({
  name,
  controlPlane: true,
  providerID: '',
  internalIPs: [internal],
  externalIPs: [],
  excludedFromLoadBalancers: false,
  ...extra,
});

const gw = (extra: Partial<GatewayServiceFacts>): GatewayServiceFacts => ({
  namespace: 'envoy-gateway-system',
  name: 'envoy-edge',
  type: 'ClusterIP',
  loadBalancerClass: '',
  externalIPs: [],
  ingress: [],
  ...extra,
});

function facts(extra: Partial<TopologyFacts>): TopologyFacts {
  return {
    platformEndpoints: [],
    nodes: [cp('cp-1', '10.0.0.11')],
    gatewayNamespace: 'envoy-gateway-system',
    gatewayServices: [],
    gatewayWorkloads: [],
    layer2Class: 'metallb.io/l2',
    ...extra,
  };
}

function row(f: TopologyFacts, signal: string): Signal {
  const found = topologySignals(f).signals.find((x) => x.signal.startsWith(signal));
  assert.ok(found, `no row ${signal}`);
  return found;
}

describe('topology signals (pure)', () => {
  const cases: Array<[string, TopologyFacts, string, TopologyClass | null, Confidence | null]> = [
    [
      'externalIPs public and on a node: B high',
      facts({ nodes: [cp('cp-1', '203.0.113.11')], gatewayServices: [gw({ externalIPs: ['203.0.113.11'] })] }),
      'gateway service',
      'B',
      'high',
    ],
    [
      'externalIPs public, on no node: B medium',
      facts({ gatewayServices: [gw({ externalIPs: ['203.0.113.99'] })] }),
      'gateway service',
      'B',
      'medium',
    ],
    ['externalIPs private: A medium', facts({ gatewayServices: [gw({ externalIPs: ['10.0.0.11'] })] }), 'gateway service', 'A', 'medium'],
    [
      'MetalLB VIP public: B high',
      facts({ gatewayServices: [gw({ type: 'LoadBalancer', loadBalancerClass: 'metallb.io/l2', ingress: [{ ip: '198.51.100.7' }] })] }),
      'gateway service',
      'B',
      'high',
    ],
    [
      'MetalLB VIP in CGNAT space: A medium',
      facts({ gatewayServices: [gw({ type: 'LoadBalancer', loadBalancerClass: 'metallb', ingress: [{ ip: '100.65.0.5' }] })] }),
      'gateway service',
      'A',
      'medium',
    ],
    [
      'MetalLB without an address yet: no hint',
      facts({ gatewayServices: [gw({ type: 'LoadBalancer', loadBalancerClass: 'metallb.io/l2' })] }),
      'gateway service',
      null,
      null,
    ],
    [
      'cloud LB with a hostname: C high',
      facts({ gatewayServices: [gw({ type: 'LoadBalancer', ingress: [{ hostname: 'a1.elb.amazonaws.com' }] })] }),
      'gateway service',
      'C',
      'high',
    ],
    [
      'classless LB with a public IP: C medium',
      facts({ gatewayServices: [gw({ type: 'LoadBalancer', ingress: [{ ip: '198.51.100.9' }] })] }),
      'gateway service',
      'C',
      'medium',
    ],
    ['ClusterIP without externalIPs: no hint', facts({ gatewayServices: [gw({})] }), 'gateway service', null, null],
    ['no gateway Service: no hint', facts({}), 'gateway service', null, null],
    [
      'aws providerID on every node: C medium',
      facts({ nodes: [cp('cp-1', '10.0.0.11', { providerID: 'aws:///eu-west-1a/i-1' })] }),
      'cloud provider',
      'C',
      'medium',
    ],
    [
      'aws providerID on part of the nodes: C low',
      facts({ nodes: [cp('cp-1', '10.0.0.11', { providerID: 'aws:///eu-west-1a/i-1' }), cp('cp-2', '10.0.0.12')] }),
      'cloud provider',
      'C',
      'low',
    ],
    [
      'rke2 providerID is the distribution: no hint',
      facts({ nodes: [cp('cp-1', '10.0.0.11', { providerID: 'rke2://cp-1' })] }),
      'cloud provider',
      null,
      null,
    ],
    ['an unknown scheme: no hint', facts({ nodes: [cp('cp-1', '10.0.0.11', { providerID: 'acme://x' })] }), 'cloud provider', null, null],
    [
      'platform endpoints on: A medium',
      facts({ platformEndpoints: [{ namespace: 'kube-system', name: 'kube-api-platform', vip: '100.65.0.30' }] }),
      'platform endpoints',
      'A',
      'medium',
    ],
    [
      'a control-plane node with a public ExternalIP: B low',
      facts({ nodes: [cp('cp-1', '10.0.0.11', { externalIPs: ['203.0.113.11'] })] }),
      'node addresses',
      'B',
      'low',
    ],
    ['only private node addresses: no hint (A, B behind a VIP and C all fit)', facts({}), 'node addresses', null, null],
    [
      'node addresses on a cloud: no hint',
      facts({ nodes: [cp('cp-1', '10.0.0.11', { providerID: 'gce://p/z/cp-1', externalIPs: ['203.0.113.11'] })] }),
      'node addresses',
      null,
      null,
    ],
    [
      'host network never hints',
      facts({ gatewayWorkloads: [{ kind: 'DaemonSet', namespace: 'envoy-gateway-system', name: 'envoy', hostNetwork: true }] }),
      'gateway host network',
      null,
      null,
    ],
  ];
  for (const [name, f, signal, hint, confidence] of cases)
    test(name, () => {
      const found = row(f, signal);
      assert.deepEqual([found.hint, found.confidence], [hint, confidence], found.detail);
    });

  test('silent failures become warnings: excluded control-plane nodes, a node without InternalIP, a layer mismatch', () => {
    const { warnings } = topologySignals(
      facts({
        nodes: [
          cp('cp-1', '10.0.0.11', { excludedFromLoadBalancers: true }),
          cp('cp-2', '10.0.0.12', { excludedFromLoadBalancers: true, internalIPs: [] }),
        ],
        gatewayServices: [gw({ externalIPs: ['10.0.0.11'] })],
        addressLayer: 'lb-l2',
      }),
    );
    assert.equal(warnings.length, 3, warnings.join('\n'));
    assert.match(warnings[0] ?? '', /INGRESS_ADDRESS_LAYER is lb-l2 but envoy-gateway-system\/envoy-edge is not LoadBalancer/);
    assert.match(warnings[1] ?? '', /so no control-plane node announces the platform VIPs/);
    assert.match(warnings[2] ?? '', /cp-2 reports no InternalIP/);
  });
});
