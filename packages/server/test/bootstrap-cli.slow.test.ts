import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  ensureNamespace,
  GOOD_CONFIG,
  GOOD_VALUES,
  KUBE_OVN_COREFILE,
  seedClusterConfig,
  seedGateway,
  seedKubeOvn,
  seedNodes,
  seedPlatformEndpoint,
  tempDir,
  writeTemp,
} from './bootstrap-clusters.ts';
import { runCli } from './cli-runner.ts';
import { KubeApi } from './kube-api/index.ts';

// The commands as an operator runs them: the installed CLI, a kubeconfig file, real exit codes and streams.
describe('tenantry bootstrap (the CLI process)', () => {
  let kube: KubeApi;
  let dir: string;
  let kubeconfig: string;
  let values: string;
  const cli = (...args: string[]) => runCli(['bootstrap', ...args], { HOME: dir });

  before(async () => {
    kube = await KubeApi.start();
    dir = await tempDir('bootstrap-cli');
    kubeconfig = await kube.writeKubeconfig(`${dir}/kubeconfig`, 'operator');
    values = await writeTemp(dir, 'values.yaml', GOOD_VALUES);
    seedNodes(kube, { external: '203.0.113.' });
    seedGateway(kube, { type: 'ClusterIP', externalIPs: ['203.0.113.11'] });
    seedKubeOvn(kube);
    seedClusterConfig(kube, GOOD_CONFIG);
    seedPlatformEndpoint(kube, 'kube-api-platform', 'kube-system', '100.65.0.30');
    seedPlatformEndpoint(kube, 'edge-gateway-platform', 'envoy-gateway-system', '100.65.0.31');
    kube.runDeployments({ stepMs: 2 });
    ensureNamespace(kube, 'kube-system');
    kube.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'vpc-dns-corefile', namespace: 'kube-system' },
      data: { Corefile: KUBE_OVN_COREFILE },
    });
    kube.create({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'vpc-dns-p1', namespace: 'kube-system', labels: { 'ovn.kubernetes.io/vpc-dns': 'true' } },
      spec: {
        replicas: 2,
        selector: { matchLabels: { 'k8s-app': 'vpc-dns-p1' } },
        template: {
          metadata: { labels: { 'k8s-app': 'vpc-dns-p1' } },
          spec: { volumes: [{ name: 'c', configMap: { name: 'vpc-dns-corefile' } }] },
        },
      },
    });
  });
  after(() => kube.close());

  test('doctor topology: JSON for scripts, exit 0', async () => {
    const result = await cli('doctor', 'topology', '--kubeconfig', kubeconfig, '--json', '--values', values);
    assert.equal(result.code, 0, result.stderr);
    const report = JSON.parse(result.stdout) as { class: string; verdict: string; confidence: string };
    // The feature is on (A medium) against public node addresses on the front door (B high).
    assert.deepEqual([report.class, report.verdict, report.confidence], ['B', 'not-needed', 'medium']);
  });

  test('a cluster that cannot be reached: one line on stderr, exit 3; a missing context: exit 2', async () => {
    // A port nothing listens on (fetch refuses well-known ports such as 9 outright).
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const text = (await readFile(kubeconfig, 'utf8')).replace(
      /"server":"https:\/\/127\.0\.0\.1:\d+"/,
      `"server":"https://127.0.0.1:${port}"`,
    );
    const unreachable = await writeTemp(dir, 'unreachable-kubeconfig', text);
    const result = await cli('doctor', 'topology', '--kubeconfig', unreachable);
    assert.equal(result.code, 3);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /^tenantry: cannot read nodes: ECONNREFUSED\n$/);
    const context = await cli('config', 'check', '--kubeconfig', kubeconfig, '--context', 'prod');
    assert.equal(context.code, 2);
    assert.equal(context.stderr, 'tenantry: the kubeconfig has no context "prod"\n');
  });

  test('config check: every rule passes (exit 0), then a violation per line (exit 1)', async () => {
    const good = await cli('config', 'check', '--kubeconfig', kubeconfig, '--values', values);
    assert.equal(good.code, 0, good.stdout + good.stderr);
    assert.equal(good.stdout, 'ConfigMap flux-system/cluster-config: every rule passes\n');
    const file = await writeTemp(
      dir,
      'cluster-config.env',
      Object.entries({ ...GOOD_CONFIG, EGRESS_GLOBAL_ALLOWLIST: '["100.65.0.2"]' })
        .map(([k, v]) => `${k}=${v}`)
        .join('\n'),
    );
    const bad = await cli('config', 'check', '--kubeconfig', kubeconfig, '--values', values, '--config', file);
    assert.equal(bad.code, 1);
    assert.equal(
      bad.stdout,
      [
        'RULE               SUBJECT                    PROBLEM',
        'vip-in-allowlists  KUBE_API_INTERNAL_VIP      100.65.0.30 is not in EGRESS_GLOBAL_ALLOWLIST',
        'vip-in-allowlists  EDGE_GATEWAY_INTERNAL_VIP  100.65.0.31 is not in EGRESS_GLOBAL_ALLOWLIST',
        '2 violations',
        '',
      ].join('\n'),
    );
  });

  test('anchors apply --dry-run from a configuration file; bad flags and a missing ConfigMap are exit 2', async () => {
    const file = await writeTemp(
      dir,
      'anchors.env',
      Object.entries(GOOD_CONFIG)
        .map(([k, v]) => `${k}="${v}"`)
        .join('\n'),
    );
    const dry = await cli('anchors', 'apply', '--kubeconfig', kubeconfig, '--config', file, '--dry-run');
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /cp-3 {2}100\.65\.0\.13\/16 {2}br-ext-cloud {2}kube-system\/tenantry-anchor-apply-cp-3\n/);
    assert.equal(kube.requests((r) => r.resource === 'jobs').length, 0);
    const badFlag = await cli('anchors', 'apply', '--kubeconfig', kubeconfig, '--timeout', 'soon');
    assert.equal(badFlag.code, 2);
    assert.equal(badFlag.stderr, 'tenantry: --timeout must be a whole number of at least 1, got "soon"\n');
    const missing = await cli('doctor', 'anchors', '--kubeconfig', kubeconfig, '--configmap', 'tenantry/cluster-config');
    assert.equal(missing.code, 2);
    assert.equal(
      missing.stderr,
      'tenantry: the cluster configuration ConfigMap tenantry/cluster-config does not exist; give --config FILE or --configmap NAMESPACE/NAME\n',
    );
  });

  test('resolvers apply: progress on stderr, the result on stdout, exit 0', async () => {
    const result = await cli('resolvers', 'apply', '--kubeconfig', kubeconfig, '--values', values, '--poll-ms', '10');
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /kube-system\/vpc-dns-p1 {2}kube-system\/vpc-dns-corefile \(updated\) {2}yes {8}done\n/);
    assert.match(result.stderr, /^resolvers: 0 of 1 rolled out; kube-system\/vpc-dns-p1: restarting\n/);
    assert.match(result.stderr, /resolvers: 1 of 1 rolled out\n$/);
  });
});
