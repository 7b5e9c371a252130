import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GOOD_CONFIG } from '../../../test/bootstrap-clusters.ts';
import { parseClusterConfig } from '../cluster-config.ts';
import { parseAddress } from '../ip.ts';
import type { NetworkFacts, UsedAddress } from '../network.ts';
import { parseNorthboundListing } from '../network.ts';
import type { NodeFacts } from '../topology/facts.ts';
import { validateAnchors } from './validate.ts';

const used = (address: string, owner: string): UsedAddress => ({ address: parseAddress(address) ?? assert.fail(address), owner });

/** What Kube-OVN holds in the external subnet in these examples (seedKubeOvn's defaults). */
function network(extra: Partial<NetworkFacts> = {}): NetworkFacts {
  const management = used('100.65.0.2', 'OvnEip ovn-cluster-ext-cloud');
  return {
    kubeOvn: true,
    routerPorts: [
      used('100.65.0.2', 'OvnEip ovn-cluster-ext-cloud (router port)'),
      used('100.65.0.101', 'OvnEip vpc-p1-ext-cloud (router port)'),
    ],
    managementRouterPort: management,
    projectAddresses: [used('100.65.0.150', 'OvnEip eip-p1-web (nat)')],
    systemSnat: [management, used('100.65.0.3', 'OvnSnatRule snat-mgmt (ovn-cluster)')],
    notes: [],
    ...extra,
  };
}

const node = (name: string, controlPlane = true): NodeFacts => ({
  name,
  controlPlane,
  providerID: '',
  internalIPs: ['192.168.110.1'],
  externalIPs: [],
  excludedFromLoadBalancers: false,
});
const NODES = [node('cp-1'), node('cp-2'), node('cp-3'), node('worker-1', false)];

function check(overrides: Record<string, string>, options: { nodes?: NodeFacts[]; network?: NetworkFacts } = {}) {
  const { config, problems } = parseClusterConfig({ ...GOOD_CONFIG, ...overrides }, 'test');
  return validateAnchors({ config, problems, nodes: options.nodes ?? NODES, network: options.network ?? network() });
}

function lines(overrides: Record<string, string>, options: Parameters<typeof check>[1] = {}): string[] {
  return check(overrides, options).violations.map((v) => `${v.rule} | ${v.subject} | ${v.message}`);
}

const ANCHORS = 'EXT_NET_ANCHOR_IPS';

describe('anchor rules, each with a failing example', () => {
  test('a good configuration passes and resolves every anchor with the subnet prefix', () => {
    const result = check({});
    assert.deepEqual(result.violations, []);
    assert.deepEqual(
      result.anchors.map((a) => `${a.node} ${a.cidr}`),
      ['cp-1 100.65.0.11/16', 'cp-2 100.65.0.12/16', 'cp-3 100.65.0.13/16'],
    );
  });

  // Each row: the rule, the configuration change (or cluster) that breaks it, and the exact line(s).
  const rows: Array<[string, Record<string, string>, Parameters<typeof check>[1], string[]]> = [
    [
      'readable: not a pair',
      { [ANCHORS]: 'cp-1:100.65.0.11,cp-2=100.65.0.12,cp-3=100.65.0.13' },
      {},
      [
        'readable | EXT_NET_ANCHOR_IPS | "cp-1:100.65.0.11" is not a <node>=<ip> pair',
        'one-per-control-plane-node | cp-1 | control-plane node without an anchor',
      ],
    ],
    [
      'readable: not an address',
      { [ANCHORS]: 'cp-1=100.65.0.311,cp-2=100.65.0.12,cp-3=100.65.0.13' },
      {},
      [
        'readable | EXT_NET_ANCHOR_IPS | "cp-1=100.65.0.311": "100.65.0.311" is not an IP address (or address/prefix)',
        'one-per-control-plane-node | cp-1 | control-plane node without an anchor',
      ],
    ],
    [
      'external subnet unknown',
      { EXT_NET_CIDR: '' },
      {},
      ['external-subnet | EXT_NET_CIDR | the external subnet is unknown: set EXT_NET_CIDR (no Kube-OVN Subnet ext-cloud either)'],
    ],
    [
      'one per control-plane node: one missing',
      { [ANCHORS]: 'cp-1=100.65.0.11,cp-2=100.65.0.12' },
      {},
      ['one-per-control-plane-node | cp-3 | control-plane node without an anchor'],
    ],
    [
      'one per control-plane node: listed twice',
      { [ANCHORS]: 'cp-1=100.65.0.11,cp-2=100.65.0.12,cp-3=100.65.0.13,cp-1=100.65.0.14' },
      {},
      ['one-per-control-plane-node | cp-1 | has 2 anchors; one per node'],
    ],
    [
      'one per control-plane node: none at all',
      { [ANCHORS]: '' },
      {},
      ['one-per-control-plane-node | EXT_NET_ANCHOR_IPS | is empty: every control-plane node needs an anchor'],
    ],
    [
      'one per control-plane node: no control plane',
      {},
      { nodes: [node('worker-1', false)] },
      [
        'one-per-control-plane-node | nodes | no control-plane node found (node-role.kubernetes.io/control-plane)',
        'control-plane-only | cp-1=100.65.0.11 | there is no node cp-1',
        'control-plane-only | cp-2=100.65.0.12 | there is no node cp-2',
        'control-plane-only | cp-3=100.65.0.13 | there is no node cp-3',
      ],
    ],
    [
      'only control-plane nodes: a worker',
      { [ANCHORS]: `${GOOD_CONFIG[ANCHORS]},worker-1=100.65.0.21` },
      {},
      ['control-plane-only | worker-1=100.65.0.21 | worker-1 is not a control-plane node'],
    ],
    [
      'only control-plane nodes: an unknown node',
      { [ANCHORS]: `${GOOD_CONFIG[ANCHORS]},cp-9=100.65.0.19` },
      {},
      ['control-plane-only | cp-9=100.65.0.19 | there is no node cp-9'],
    ],
    [
      'inside the external subnet',
      { [ANCHORS]: 'cp-1=100.66.0.11,cp-2=100.65.0.12,cp-3=100.65.0.13', EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.100,100.66.0.11' },
      {},
      ['in-external-subnet | cp-1=100.66.0.11 | 100.66.0.11 is outside the external subnet 100.65.0.0/16'],
    ],
    [
      'with the subnet prefix',
      { [ANCHORS]: 'cp-1=100.65.0.11/24,cp-2=100.65.0.12/16,cp-3=100.65.0.13' },
      {},
      ['in-external-subnet | cp-1=100.65.0.11 | written with /24; the external subnet 100.65.0.0/16 has /16'],
    ],
    [
      'not the network address',
      { [ANCHORS]: 'cp-1=100.65.0.0,cp-2=100.65.0.12,cp-3=100.65.0.13', EXT_NET_EXCLUDE_IPS: '100.65.0.0..100.65.0.100' },
      {},
      ["in-external-subnet | cp-1=100.65.0.0 | 100.65.0.0 is the subnet's network address"],
    ],
    [
      'not the broadcast address',
      {
        [ANCHORS]: 'cp-1=100.65.255.255,cp-2=100.65.0.12,cp-3=100.65.0.13',
        EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.100,100.65.255.255',
      },
      {},
      ["in-external-subnet | cp-1=100.65.255.255 | 100.65.255.255 is the subnet's broadcast address"],
    ],
    [
      'not the gateway',
      { [ANCHORS]: 'cp-1=100.65.0.1,cp-2=100.65.0.12,cp-3=100.65.0.13' },
      {},
      ["in-external-subnet | cp-1=100.65.0.1 | 100.65.0.1 is the external subnet's gateway"],
    ],
    [
      'no duplicates',
      { [ANCHORS]: 'cp-1=100.65.0.11,cp-2=100.65.0.11,cp-3=100.65.0.13' },
      {},
      ['no-duplicates | cp-2=100.65.0.11 | 100.65.0.11 is also the anchor of cp-1'],
    ],
    [
      'inside EXT_NET_EXCLUDE_IPS (ranges)',
      { EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.11,100.65.0.13' },
      {},
      ['in-exclude-ips | cp-2=100.65.0.12 | 100.65.0.12 is not in EXT_NET_EXCLUDE_IPS, so the address manager may hand it to a project'],
    ],
    [
      'not in an allowlist (listed)',
      { INGRESS_GLOBAL_ALLOWLIST: '["100.65.0.2","100.65.0.30","100.65.0.31","100.65.0.12"]' },
      {},
      ['not-in-allowlist | cp-2=100.65.0.12 | INGRESS_GLOBAL_ALLOWLIST lists it: anchors stay out of the allowlists'],
    ],
    [
      'not in an allowlist (covered by a subnet)',
      { EGRESS_GLOBAL_ALLOWLIST: '100.65.0.0/28, 100.65.0.30, 100.65.0.31' },
      {},
      [
        'not-in-allowlist | cp-1=100.65.0.11 | EGRESS_GLOBAL_ALLOWLIST covers it (100.65.0.0/28): anchors stay out of the allowlists',
        'not-in-allowlist | cp-2=100.65.0.12 | EGRESS_GLOBAL_ALLOWLIST covers it (100.65.0.0/28): anchors stay out of the allowlists',
        'not-in-allowlist | cp-3=100.65.0.13 | EGRESS_GLOBAL_ALLOWLIST covers it (100.65.0.0/28): anchors stay out of the allowlists',
      ],
    ],
    [
      'never a logical-router-port address',
      {},
      { network: network({ routerPorts: [used('100.65.0.12', 'OvnEip vpc-p2-ext-cloud (router port)')] }) },
      [
        "not-router-port | cp-2=100.65.0.12 | 100.65.0.12 is a logical-router-port address (OvnEip vpc-p2-ext-cloud (router port)); two ARP answers would flip the upstream router's cache",
      ],
    ],
    [
      'never the management router port (here also in the allowlists, as the system SNAT address it is)',
      { [ANCHORS]: 'cp-1=100.65.0.2,cp-2=100.65.0.12,cp-3=100.65.0.13' },
      {},
      [
        'not-in-allowlist | cp-1=100.65.0.2 | INGRESS_GLOBAL_ALLOWLIST lists it: anchors stay out of the allowlists',
        'not-in-allowlist | cp-1=100.65.0.2 | EGRESS_GLOBAL_ALLOWLIST lists it: anchors stay out of the allowlists',
        "not-management-router-port | cp-1=100.65.0.2 | 100.65.0.2 is the management router port's address (OvnEip ovn-cluster-ext-cloud); never reuse it",
      ],
    ],
    [
      'not a VIP',
      {
        [ANCHORS]: 'cp-1=100.65.0.11,cp-2=100.65.0.12,cp-3=100.65.0.30',
        INGRESS_GLOBAL_ALLOWLIST: '100.65.0.2',
        EGRESS_GLOBAL_ALLOWLIST: '100.65.0.2',
      },
      {},
      ['not-in-use | cp-3=100.65.0.30 | 100.65.0.30 is KUBE_API_INTERNAL_VIP'],
    ],
    [
      'not a system SNAT address',
      { [ANCHORS]: 'cp-1=100.65.0.3,cp-2=100.65.0.12,cp-3=100.65.0.13' },
      {},
      ['not-in-use | cp-1=100.65.0.3 | 100.65.0.3 is in use by OvnSnatRule snat-mgmt (ovn-cluster)'],
    ],
    [
      'not a project address',
      { [ANCHORS]: 'cp-1=100.65.0.150,cp-2=100.65.0.12,cp-3=100.65.0.13', EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.200' },
      {},
      ['not-in-use | cp-1=100.65.0.150 | 100.65.0.150 is in use by OvnEip eip-p1-web (nat)'],
    ],
  ];
  for (const [name, overrides, options, expected] of rows)
    test(name, () => {
      const result = check(overrides, options);
      assert.deepEqual(lines(overrides, options), expected);
      assert.deepEqual(result.anchors, [], 'nothing is resolved while a rule is broken');
    });

  test('every violation is reported, not only the first', () => {
    const all = lines({ [ANCHORS]: 'cp-1=100.65.0.2,cp-2=100.65.0.2,worker-1=100.65.0.30', EXT_NET_EXCLUDE_IPS: '100.65.0.200' });
    assert.deepEqual(
      all.map((l) => l.split(' | ')[0]),
      [
        'one-per-control-plane-node',
        'in-exclude-ips',
        'not-in-allowlist',
        'not-in-allowlist',
        'not-management-router-port',
        'no-duplicates',
        'in-exclude-ips',
        'not-in-allowlist',
        'not-in-allowlist',
        'not-management-router-port',
        'control-plane-only',
        'in-exclude-ips',
        'not-in-allowlist',
        'not-in-allowlist',
        'not-in-use',
      ],
    );
  });

  test("the northbound listing's router ports count like Kube-OVN's", () => {
    const listing = `name                : ovn-cluster-ext-cloud
networks            : ["100.65.0.2/16"]

name                : vpc-p7-ext-cloud
networks            : ["100.65.0.13/16", "fd00::13/64"]

name                : vpc-p7-subnet
networks            : ["10.7.0.1/24"]
`;
    const ports = parseNorthboundListing(listing).map((p) => `${p.name} ${p.address}`);
    assert.deepEqual(ports, [
      'ovn-cluster-ext-cloud 100.65.0.2',
      'vpc-p7-ext-cloud 100.65.0.13',
      'vpc-p7-ext-cloud fd00::13',
      'vpc-p7-subnet 10.7.0.1',
    ]);
  });
});
