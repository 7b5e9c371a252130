import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GOOD_CONFIG, KUBE_OVN_COREFILE } from '../../../test/bootstrap-clusters.ts';
import { assertGolden } from '../../../test/golden.ts';
import { valuesFromTree } from '../chart-values.ts';
import { parseClusterConfig } from '../cluster-config.ts';
import { CorefileError, editCorefile, type HostsEdit } from './corefile.ts';
import { planHosts } from './hosts.ts';

const ENTRIES = [
  { address: '100.65.0.30', names: ['kube-api.example.com'] },
  {
    address: '100.65.0.31',
    names: [
      'login.example.com',
      'backend.example.com',
      'console.example.com',
      'billing.example.com',
      's3.example.com',
      'grafana.example.com',
    ],
  },
];
const PLATFORM = ENTRIES.flatMap((e) => e.names);
const APPLY: HostsEdit = { entries: ENTRIES, remove: PLATFORM, ttl: 30, vips: ['100.65.0.30', '100.65.0.31'] };
const REMOVE: HostsEdit = { entries: [], remove: PLATFORM, vips: ['100.65.0.30', '100.65.0.31'] };

describe('the hosts block of a Corefile', () => {
  test("apply on Kube-OVN's Corefile adds the block before `kubernetes`, TTL and fallthrough last; again changes nothing", async () => {
    const once = editCorefile(KUBE_OVN_COREFILE, APPLY);
    assert.equal(once.changed, true);
    assert.equal(once.blocks, 1);
    await assertGolden('bootstrap/corefile-apply.txt', `${once.text}\n`);
    const lines = once.text.split('\n');
    const hosts = lines.indexOf('    hosts {');
    assert.ok(hosts > lines.indexOf('    ready') && hosts < lines.findIndex((l) => l.includes('kubernetes cluster.local')));
    assert.deepEqual(lines.slice(hosts + 1, hosts + 6), [
      '        # platform endpoints: managed by tenantry bootstrap resolvers',
      '        100.65.0.30 kube-api.example.com',
      '        100.65.0.31 login.example.com backend.example.com console.example.com billing.example.com s3.example.com grafana.example.com',
      '        ttl 30',
      '        fallthrough',
    ]);
    const twice = editCorefile(once.text, APPLY);
    assert.equal(twice.changed, false);
    assert.equal(twice.text, once.text);
  });

  test('remove takes the platform names out and keeps fallthrough; again changes nothing', async () => {
    const applied = editCorefile(KUBE_OVN_COREFILE, APPLY).text;
    const removed = editCorefile(applied, REMOVE);
    assert.equal(removed.changed, true);
    await assertGolden('bootstrap/corefile-remove.txt', `${removed.text}\n`);
    assert.ok(!PLATFORM.some((name) => removed.text.includes(name)));
    assert.match(removed.text, / {4}hosts \{\n {8}ttl 30\n {8}fallthrough\n {4}\}/);
    assert.equal(editCorefile(removed.text, REMOVE).changed, false);
  });

  test("an operator's own block: its other entries and options stay, hand-written platform names are taken over", async () => {
    const corefile = `# per-project resolver
.:53 {
  errors
  hosts /etc/coredns/extra.hosts {
    10.0.0.5 registry.internal
    100.65.0.31 console.example.com grafana.internal   # hand-added in enabling step 5
    reload 10s
    fallthrough example.com
  }
  forward . 9.9.9.9
}
example.org:53 {
  hosts {
    1.2.3.4 login.example.com
  }
}`;
    const applied = editCorefile(corefile, APPLY);
    await assertGolden('bootstrap/corefile-apply-existing.txt', `${applied.text}\n`);
    assert.match(
      applied.text,
      /example\.org:53 \{\n {2}hosts \{\n {4}1\.2\.3\.4 login\.example\.com\n {2}\}\n\}$/,
      'other zones are not touched',
    );
    const removed = editCorefile(applied.text, REMOVE);
    assert.match(
      removed.text,
      / {4}10\.0\.0\.5 registry\.internal\n {4}100\.65\.0\.31 grafana\.internal\n {4}reload 10s\n {4}ttl 30\n {4}fallthrough example\.com\n/,
    );
    assert.deepEqual(
      removed.leftovers,
      [{ address: '100.65.0.31', names: ['grafana.internal'] }],
      'names still pointing at a VIP are reported',
    );
  });

  test('a one-line `hosts FILE` becomes a block keeping its file; every root server block is edited', () => {
    const corefile = `.:53 {\n    hosts /etc/hosts\n    forward . /etc/resolv.conf\n}\n.:5353 {\n    forward . /etc/resolv.conf\n}\n`;
    const result = editCorefile(corefile, APPLY);
    assert.equal(result.blocks, 2);
    assert.match(result.text, /^\.:53 \{\n {4}hosts \/etc\/hosts \{\n {8}# platform/);
    assert.match(result.text, /\.:5353 \{\n {4}hosts \{\n/);
  });

  test('what it cannot edit safely it refuses, naming the line', () => {
    assert.throws(
      () => editCorefile('.:53 {\n  hosts { 1.2.3.4 a.example }\n}', APPLY),
      new CorefileError('line 2: write the hosts block with one entry per line ("hosts { 1.2.3.4 a.example }")'),
    );
    assert.throws(
      () => editCorefile('.:53 {\n  hosts {\n    strange option\n  }\n}', APPLY),
      /cannot read "strange option" in a hosts block/,
    );
    assert.throws(() => editCorefile('.:53 {\n  errors\n', APPLY), /the server block opened on line 1 is not closed/);
    assert.throws(() => editCorefile('example.org {\n  errors\n}', APPLY), /no server block for the root zone/);
  });
});

describe('the hosts entries from the configuration and the chart values', () => {
  const values = valuesFromTree(
    {
      platform: {
        hostnames: {
          kubeAPI: 'Kube-API.example.com',
          login: 'login.example.com',
          backend: 'backend.example.com',
          console: 'console.example.com',
          billing: 'billing.example.com',
          s3: 's3.example.com',
          extra: ['grafana.example.com'],
        },
      },
    },
    ['values.yaml'],
  );
  const plan = (overrides: Record<string, string>, mode: 'apply' | 'remove' = 'apply', v = values) =>
    planHosts(parseClusterConfig({ ...GOOD_CONFIG, ...overrides }, 'ConfigMap flux-system/cluster-config').config, v, mode);

  test('both endpoints on: the cluster API line, then the gateway line in the seed order with the extras', () => {
    const result = plan({});
    assert.deepEqual(result.problems, []);
    assert.deepEqual(result.entries, ENTRIES);
    assert.deepEqual(result.platformNames, PLATFORM);
  });

  test('a switch off leaves its line out (its names are still taken out of old entries)', () => {
    const result = plan({ PLATFORM_ENDPOINT_KUBE_API_ENABLED: 'false' });
    assert.deepEqual(
      result.entries.map((e) => e.address),
      ['100.65.0.31'],
    );
    assert.ok(result.platformNames.includes('kube-api.example.com'));
  });

  test('refusals: both switches off, a VIP missing, a name on both VIPs, an unset hostname noted', () => {
    assert.match(
      plan({ PLATFORM_ENDPOINT_KUBE_API_ENABLED: 'false', PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED: 'false' }).problems[0]?.message ?? '',
      /both are false in ConfigMap flux-system\/cluster-config: nothing to map \(to take the names out, use tenantry bootstrap resolvers remove\)/,
    );
    assert.deepEqual(plan({ EDGE_GATEWAY_INTERNAL_VIP: '' }).problems, [
      {
        field: 'EDGE_GATEWAY_INTERNAL_VIP',
        message: 'is empty in ConfigMap flux-system/cluster-config while the edge gateway endpoint is on',
      },
    ]);
    const clash = valuesFromTree({ platform: { hostnames: { kubeAPI: 'login.example.com', login: 'login.example.com' } } }, []);
    assert.match(plan({}, 'apply', clash).problems[0]?.message ?? '', /"login\.example\.com" is also a gateway hostname/);
    const noBilling = valuesFromTree({ platform: { hostnames: { kubeAPI: 'k.example.com', login: 'login.example.com' } } }, []);
    assert.ok(plan({}, 'apply', noBilling).notes.includes('platform.hostnames.billing is not set: no entry for it'));
    assert.equal(
      plan({ PLATFORM_ENDPOINT_KUBE_API_ENABLED: 'false', PLATFORM_ENDPOINT_EDGE_GATEWAY_ENABLED: 'false' }, 'remove').problems.length,
      0,
    );
  });
});
