import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseClusterConfig, parseConfigText } from './cluster-config.ts';
import { inRange, isPublic, parseAddress, parseCidr, parseRange, subnetBounds } from './ip.ts';

describe('cluster configuration', () => {
  test('the env file form and the ConfigMap manifest form read alike', () => {
    const env = parseConfigText(
      '# cluster-config.env\nEXT_NET_CIDR=100.65.0.0/16\nINGRESS_GLOBAL_ALLOWLIST=["100.65.0.2","100.65.0.30"] # VIPs\n',
    );
    const manifest = parseConfigText(
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-config\ndata:\n  EXT_NET_CIDR: 100.65.0.0/16\n  INGRESS_GLOBAL_ALLOWLIST: \'["100.65.0.2","100.65.0.30"]\'\n',
    );
    assert.deepEqual(env, manifest);
    assert.throws(() => parseConfigText('apiVersion: v1\nkind: Secret\n'), /has no `data` map/);
  });

  test('lists: JSON arrays, bracketed and plain comma or space separated; ranges; booleans', () => {
    const { config, problems } = parseClusterConfig(
      {
        INGRESS_GLOBAL_ALLOWLIST: '["100.65.0.2", "10.0.0.0/8"]',
        EGRESS_GLOBAL_ALLOWLIST: '[100.65.0.2, 100.65.0.30]',
        EXT_NET_EXCLUDE_IPS: '100.65.0.1..100.65.0.100 100.65.0.200',
        PLATFORM_ENDPOINT_KUBE_API_ENABLED: 'TRUE',
        EXT_NET_ANCHOR_IPS: 'cp-1=100.65.0.11/16, cp-2 = 100.65.0.12',
      },
      'test',
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(
      config.ingressAllowlist.map((c) => c.text),
      ['100.65.0.2', '10.0.0.0/8'],
    );
    assert.deepEqual(
      config.egressAllowlist.map((c) => c.text),
      ['100.65.0.2', '100.65.0.30'],
    );
    assert.deepEqual(
      config.excludeIps.map((r) => r.text),
      ['100.65.0.1..100.65.0.100', '100.65.0.200'],
    );
    assert.equal(config.kubeApi.enabled, true);
    assert.equal(config.edgeGateway.enabled, false);
    assert.deepEqual(
      config.anchors.map((a) => [a.node, a.address.toString(), a.prefix]),
      [
        ['cp-1', '100.65.0.11', 16],
        ['cp-2', '100.65.0.12', undefined],
      ],
    );
    assert.equal(config.externalSubnetName, 'ext-cloud');
    assert.equal(config.anchorInterface, 'br-ext-cloud');
  });

  test('each unreadable value is a problem naming its field', () => {
    const { problems } = parseClusterConfig(
      {
        EXT_NET_EXCLUDE_IPS: '100.65.0.100..100.65.0.1',
        KUBE_API_INTERNAL_VIP: '100.65.0',
        EXT_NET_CIDR: '100.65.0.0/40',
        SYSTEM_SNAT_IPS: 'x',
      },
      'test',
    );
    assert.deepEqual(
      problems.map((p) => `${p.field}: ${p.message}`),
      [
        'EXT_NET_CIDR: "100.65.0.0/40" is not a subnet (a.b.c.d/n)',
        'EXT_NET_EXCLUDE_IPS: "100.65.0.100..100.65.0.1" is not an address or a range a..b',
        'SYSTEM_SNAT_IPS: "x" is not an IP address',
        'KUBE_API_INTERNAL_VIP: "100.65.0" is not an IP address',
      ],
    );
  });
});

describe('IP math', () => {
  test('ranges, subnet bounds, public addresses', () => {
    const range = parseRange('100.65.0.1..100.65.0.100') ?? assert.fail();
    assert.equal(inRange(parseAddress('100.65.0.100') ?? assert.fail(), range), true);
    assert.equal(inRange(parseAddress('100.65.0.101') ?? assert.fail(), range), false);
    assert.equal(inRange(parseAddress('fd00::1') ?? assert.fail(), range), false);
    const bounds = subnetBounds(parseCidr('100.65.3.7/22') ?? assert.fail());
    assert.deepEqual([bounds.network.toString(), bounds.broadcast.toString()], ['100.65.0.0', '100.65.3.255']);
    assert.equal(parseAddress('10.1'), undefined, 'no shorthand forms');
    assert.equal(parseAddress('::ffff:10.0.0.1')?.toString(), '10.0.0.1');
    assert.deepEqual(
      ['203.0.113.5', '8.8.8.8', '10.0.0.1', '100.65.0.1', '192.168.1.1', 'fd00::1', '2001:db8::1'].map((a) =>
        isPublic(parseAddress(a) ?? assert.fail()),
      ),
      [true, true, false, false, false, false, true],
    );
  });
});
