import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { V1Service } from '@kubernetes/client-node';
import { parse } from 'yaml';
import {
  GOOD_CONFIG,
  GOOD_VALUES,
  seedClusterConfig,
  seedKubeOvn,
  seedNodes,
  seedPlatformEndpoint,
  startCluster,
  tempDir,
  writeTemp,
} from '../../test/bootstrap-clusters.ts';
import { assertGolden } from '../../test/golden.ts';
import type { KubeApi } from '../../test/kube-api/index.ts';
import { type ChartValues, valuesFromTree } from './chart-values.ts';
import { parseClusterConfig } from './cluster-config.ts';
import { checkConfig, configCheck } from './config-check.ts';
import { parseAddress, parseCidr, parseRange } from './ip.ts';
import type { BootstrapKube } from './kube.ts';
import type { NetworkFacts, UsedAddress } from './network.ts';
import { EXIT, memoryIo } from './output.ts';
import type { NodeFacts } from './topology/facts.ts';

const used = (address: string, owner: string): UsedAddress => ({ address: parseAddress(address) ?? assert.fail(address), owner });

function network(extra: Partial<NetworkFacts> = {}): NetworkFacts {
  const management = used('100.65.0.2', 'OvnEip ovn-cluster-ext-cloud');
  return {
    kubeOvn: true,
    routerPorts: [
      used('100.65.0.2', 'OvnEip ovn-cluster-ext-cloud (router port)'),
      used('100.65.0.40', 'OvnEip vpc-p1-ext-cloud (router port)'),
    ],
    managementRouterPort: management,
    projectAddresses: [used('100.65.0.41', 'OvnEip eip-p1-web (nat)')],
    systemSnat: [management],
    subnet: {
      name: 'ext-cloud',
      cidr: parseCidr('100.65.0.0/16') ?? assert.fail(),
      gateway: parseAddress('100.65.0.1') ?? assert.fail(),
      excludeIps: [parseRange('100.65.0.1..100.65.0.100') ?? assert.fail()],
    },
    notes: [],
    ...extra,
  };
}

const VALUES = valuesFromTree(parse(GOOD_VALUES) as Record<string, unknown>, ['values.yaml']);
const SERVICES: V1Service[] = [
  { metadata: { name: 'kube-api-platform', namespace: 'kube-system' }, spec: { loadBalancerIP: '100.65.0.30' } },
  { metadata: { name: 'edge-gateway-platform', namespace: 'envoy-gateway-system' }, spec: { loadBalancerIP: '100.65.0.31' } },
];

const node = (name: string, controlPlane = true): NodeFacts => ({
  name,
  controlPlane,
  providerID: '',
  internalIPs: ['192.168.110.1'],
  externalIPs: [],
  excludedFromLoadBalancers: false,
});
const NODES = [node('cp-1'), node('cp-2'), node('cp-3'), node('worker-1', false)];

function lines(
  overrides: Record<string, string>,
  extra: { network?: NetworkFacts; values?: ChartValues | null; services?: V1Service[] } = {},
): string[] {
  const { config, problems } = parseClusterConfig({ ...GOOD_CONFIG, ...overrides }, 'test');
  const values = extra.values === null ? undefined : (extra.values ?? VALUES);
  return checkConfig({
    config,
    problems,
    network: extra.network ?? network(),
    services: extra.services ?? SERVICES,
    nodes: NODES,
    ...(values ? { values } : {}),
  }).violations.map((v) => `${v.rule} | ${v.subject} | ${v.message}`);
}

const BOTH = (list: string) => ({ INGRESS_GLOBAL_ALLOWLIST: list, EGRESS_GLOBAL_ALLOWLIST: list });

describe('cluster configuration rules, each with a failing example', () => {
  test('a good configuration passes every rule', () => {
    assert.deepEqual(lines({}), []);
  });

  const rows: Array<[string, Record<string, string>, Parameters<typeof lines>[1], string[]]> = [
    [
      'readable values',
      { INGRESS_GLOBAL_ALLOWLIST: '["100.65.0.2","100.65.0.30","100.65.0.31","10.0.0.0/33"]', INGRESS_ADDRESS_LAYER: 'metallb' },
      {},
      [
        'readable | INGRESS_ADDRESS_LAYER | "metallb" is not one of none, lb-l2, lb-bgp',
        'readable | INGRESS_GLOBAL_ALLOWLIST | "10.0.0.0/33" is not an address or a subnet',
      ],
    ],
    [
      'the external subnet is known',
      { EXT_NET_CIDR: '' },
      { network: network({ subnet: undefined }) },
      ['external-subnet | EXT_NET_CIDR | the external subnet is unknown: set EXT_NET_CIDR'],
    ],
    [
      'the external subnet matches the live one',
      { EXT_NET_CIDR: '100.65.0.0/24' },
      {},
      ['external-subnet | EXT_NET_CIDR | 100.65.0.0/24 differs from the live Subnet ext-cloud (100.65.0.0/16)'],
    ],
    [
      'an enabled endpoint has a VIP',
      { KUBE_API_INTERNAL_VIP: '' },
      {},
      [
        'vip-set | KUBE_API_INTERNAL_VIP | is empty while PLATFORM_ENDPOINT_KUBE_API_ENABLED is true',
        'chart-consistent | KUBE_API_INTERNAL_VIP | is empty but platformEndpoints.kubeAPI.vip is 100.65.0.30',
      ],
    ],
    [
      'the VIPs differ',
      { EDGE_GATEWAY_INTERNAL_VIP: '100.65.0.30' },
      { values: null },
      ['vips-distinct | EDGE_GATEWAY_INTERNAL_VIP | equals KUBE_API_INTERNAL_VIP (100.65.0.30); each endpoint needs its own'],
    ],
    [
      'a VIP in the external subnet',
      {
        KUBE_API_INTERNAL_VIP: '100.66.0.30',
        EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.100,100.66.0.30',
        ...BOTH('100.65.0.2,100.66.0.30,100.65.0.31'),
      },
      { values: null, network: network({ subnet: undefined }) },
      ['vip-in-external-subnet | KUBE_API_INTERNAL_VIP | 100.66.0.30 is outside the external subnet 100.65.0.0/16'],
    ],
    [
      'a VIP not the network address',
      { KUBE_API_INTERNAL_VIP: '100.65.0.0', EXT_NET_EXCLUDE_IPS: '100.65.0.0..100.65.0.100', ...BOTH('100.65.0.0/30,100.65.0.31') },
      { values: null, network: network({ subnet: undefined }) },
      ["vip-in-external-subnet | KUBE_API_INTERNAL_VIP | 100.65.0.0 is the subnet's network or broadcast address"],
    ],
    [
      'a VIP unused: not the gateway',
      { KUBE_API_INTERNAL_VIP: '100.65.0.1', ...BOTH('100.65.0.1,100.65.0.2,100.65.0.31') },
      { values: null },
      ["vip-unused | KUBE_API_INTERNAL_VIP | 100.65.0.1 is the external subnet's gateway"],
    ],
    [
      'a VIP unused: not the management router port',
      { KUBE_API_INTERNAL_VIP: '100.65.0.2', ...BOTH('100.65.0.2,100.65.0.31') },
      { values: null },
      ["vip-unused | KUBE_API_INTERNAL_VIP | 100.65.0.2 is the management router port's address (OvnEip ovn-cluster-ext-cloud)"],
    ],
    [
      'a VIP unused: not a router port',
      { KUBE_API_INTERNAL_VIP: '100.65.0.40', ...BOTH('100.65.0.2,100.65.0.40,100.65.0.31') },
      { values: null },
      ['vip-unused | KUBE_API_INTERNAL_VIP | 100.65.0.40 is in use by OvnEip vpc-p1-ext-cloud (router port)'],
    ],
    [
      'a VIP unused: not a project address',
      { EDGE_GATEWAY_INTERNAL_VIP: '100.65.0.41', ...BOTH('100.65.0.2,100.65.0.30,100.65.0.41') },
      { values: null },
      ['vip-unused | EDGE_GATEWAY_INTERNAL_VIP | 100.65.0.41 is in use by OvnEip eip-p1-web (nat)'],
    ],
    [
      'a VIP unused: not an anchor',
      { EDGE_GATEWAY_INTERNAL_VIP: '100.65.0.12', ...BOTH('100.65.0.2,100.65.0.30,100.65.0.12') },
      { values: null },
      [
        'vip-unused | EDGE_GATEWAY_INTERNAL_VIP | 100.65.0.12 is the anchor of cp-2',
        'anchor-not-in-allowlist | cp-2=100.65.0.12 | INGRESS_GLOBAL_ALLOWLIST lists it: anchors stay out of the allowlists',
        'anchor-not-in-allowlist | cp-2=100.65.0.12 | EGRESS_GLOBAL_ALLOWLIST lists it: anchors stay out of the allowlists',
        'anchor-not-in-use | cp-2=100.65.0.12 | 100.65.0.12 is EDGE_GATEWAY_INTERNAL_VIP',
      ],
    ],
    [
      'a VIP in EXT_NET_EXCLUDE_IPS (ranges)',
      { EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.29,100.65.0.31' },
      {},
      ['vip-excluded | KUBE_API_INTERNAL_VIP | 100.65.0.30 is not in EXT_NET_EXCLUDE_IPS: the address manager may hand it to a project'],
    ],
    [
      'a VIP excluded by the live subnet too',
      {
        EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.100,100.65.0.200',
        EDGE_GATEWAY_INTERNAL_VIP: '100.65.0.200',
        ...BOTH('100.65.0.2,100.65.0.30,100.65.0.200'),
      },
      { values: null },
      [
        'vip-excluded | EDGE_GATEWAY_INTERNAL_VIP | 100.65.0.200 is in EXT_NET_EXCLUDE_IPS but the live Subnet ext-cloud does not exclude it (configuration not applied?)',
      ],
    ],
    [
      'a VIP in the ingress allowlist',
      { INGRESS_GLOBAL_ALLOWLIST: '100.65.0.2,100.65.0.31' },
      {},
      ['vip-in-allowlists | KUBE_API_INTERNAL_VIP | 100.65.0.30 is not in INGRESS_GLOBAL_ALLOWLIST'],
    ],
    [
      'a VIP in the egress allowlist (a subnet entry covers the other)',
      { EGRESS_GLOBAL_ALLOWLIST: '["100.65.0.2", "100.65.0.30/32", "100.65.0.32/30"]' },
      {},
      ['vip-in-allowlists | EDGE_GATEWAY_INTERNAL_VIP | 100.65.0.31 is not in EGRESS_GLOBAL_ALLOWLIST'],
    ],
    [
      'the anchor rules: anchors out of the allowlists',
      { ...BOTH('100.65.0.2,100.65.0.30,100.65.0.31,100.65.0.13') },
      {},
      [
        'anchor-not-in-allowlist | cp-3=100.65.0.13 | INGRESS_GLOBAL_ALLOWLIST lists it: anchors stay out of the allowlists',
        'anchor-not-in-allowlist | cp-3=100.65.0.13 | EGRESS_GLOBAL_ALLOWLIST lists it: anchors stay out of the allowlists',
      ],
    ],
    [
      'the system SNAT IPs in both allowlists',
      { ...BOTH('100.65.0.30,100.65.0.31'), SYSTEM_SNAT_IPS: '100.65.0.3' },
      {},
      [
        'system-snat-in-allowlists | 100.65.0.3 | SYSTEM_SNAT_IPS: not in INGRESS_GLOBAL_ALLOWLIST',
        'system-snat-in-allowlists | 100.65.0.3 | SYSTEM_SNAT_IPS: not in EGRESS_GLOBAL_ALLOWLIST',
        'system-snat-in-allowlists | 100.65.0.2 | OvnEip ovn-cluster-ext-cloud: not in INGRESS_GLOBAL_ALLOWLIST',
        'system-snat-in-allowlists | 100.65.0.2 | OvnEip ovn-cluster-ext-cloud: not in EGRESS_GLOBAL_ALLOWLIST',
      ],
    ],
    [
      'the switches as the chart has them',
      { PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED: 'false' },
      {},
      [
        'chart-consistent | PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED | is false but platformEndpoints.edgeGateway.enabled is true in values.yaml',
        'chart-deployed | PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED | is false but the Service envoy-gateway-system/edge-gateway-platform still exists',
      ],
    ],
    [
      'the VIPs as the chart has them',
      {},
      {
        values: valuesFromTree(
          { platformEndpoints: { kubeAPI: { enabled: true, vip: '100.65.0.32' }, edgeGateway: { enabled: true, vip: '100.65.0.31' } } },
          ['v.yaml'],
        ),
      },
      ['chart-consistent | KUBE_API_INTERNAL_VIP | is 100.65.0.30 but platformEndpoints.kubeAPI.vip is 100.65.0.32'],
    ],
    [
      "the chart's VIP is an address",
      {},
      {
        values: valuesFromTree(
          { platformEndpoints: { kubeAPI: { enabled: true, vip: '100.65.0.30/32' }, edgeGateway: { enabled: true, vip: '100.65.0.31' } } },
          ['v.yaml'],
        ),
      },
      ['chart-consistent | platformEndpoints.kubeAPI.vip | "100.65.0.30/32" is not an IP address'],
    ],
    [
      "the chart's Services are deployed",
      {},
      { services: [] },
      [
        'chart-deployed | PLATFORM_ENDPOINT_KUBE_API_ENABLED | is true but the Service kube-system/kube-api-platform does not exist (enabling step 4 not done?)',
        'chart-deployed | PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED | is true but the Service envoy-gateway-system/edge-gateway-platform does not exist (enabling step 4 not done?)',
      ],
    ],
    [
      "the chart's Services ask for the VIPs",
      {},
      {
        services: [
          SERVICES[0] as V1Service,
          { metadata: { name: 'edge-gateway-platform', namespace: 'envoy-gateway-system' }, spec: { loadBalancerIP: '100.65.0.39' } },
        ],
      },
      [
        'chart-deployed | EDGE_GATEWAY_INTERNAL_VIP | is 100.65.0.31 but the Service envoy-gateway-system/edge-gateway-platform asks for 100.65.0.39',
      ],
    ],
  ];
  for (const [name, overrides, extra, expected] of rows) test(name, () => assert.deepEqual(lines(overrides, extra), expected));
});

describe('bootstrap config check against a cluster', () => {
  let kube: KubeApi;
  let client: BootstrapKube;
  let values: string;
  before(async () => {
    ({ kube, client } = await startCluster());
    seedNodes(kube);
    seedKubeOvn(kube);
    seedPlatformEndpoint(kube, 'kube-api-platform', 'kube-system', '100.65.0.30');
    seedPlatformEndpoint(kube, 'edge-gateway-platform', 'envoy-gateway-system', '100.65.0.31');
    values = await writeTemp(await tempDir('config-check'), 'values.yaml', GOOD_VALUES);
  });
  after(() => kube.close());

  test('every rule passes: exit 0', async () => {
    seedClusterConfig(kube, GOOD_CONFIG);
    const io = memoryIo();
    assert.equal(await configCheck(client, { values: [values] }, io), EXIT.ok);
    assert.equal(io.stdout, 'ConfigMap flux-system/cluster-config: every rule passes\n');
  });

  test('violations: one line each, exit 1 (table and JSON)', async () => {
    seedClusterConfig(kube, {
      ...GOOD_CONFIG,
      KUBE_API_INTERNAL_VIP: '100.65.0.150', // a project's EIP (seedKubeOvn)
      EGRESS_GLOBAL_ALLOWLIST: '100.65.0.30',
      PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED: 'yes',
    });
    const io = memoryIo();
    assert.equal(await configCheck(client, { values: [values] }, io), EXIT.findings);
    await assertGolden('bootstrap/config-check.txt', io.stdout.replaceAll(values, '$VALUES'));
    const jsonIo = memoryIo();
    assert.equal(await configCheck(client, { values: [values], json: true }, jsonIo), EXIT.findings);
    await assertGolden('bootstrap/config-check.json', jsonIo.stdout.replaceAll(values, '$VALUES'));
  });

  test('without --values the chart rules are skipped, and said to be', async () => {
    seedClusterConfig(kube, GOOD_CONFIG);
    const io = memoryIo();
    assert.equal(await configCheck(client, { values: [] }, io), EXIT.ok);
    assert.match(io.stderr, /note: no --values given: the switches and VIPs were not compared with the chart values or its Services/);
  });
});
