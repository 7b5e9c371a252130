import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from './cli-runner.ts';

/**
 * The commands that talk to a cluster, on a machine that has no kubeconfig and is no pod: each says where it
 * looked, in one line, and exits 2 like any configuration a person has to give, before any call is made.
 */
const COMMANDS = [
  ['bootstrap', 'doctor', 'topology'],
  ['bootstrap', 'doctor', 'anchors'],
  ['bootstrap', 'anchors', 'apply', '--dry-run'],
  ['bootstrap', 'resolvers', 'apply', '--dry-run'],
  ['bootstrap', 'resolvers', 'remove', '--dry-run'],
  ['bootstrap', 'config', 'check'],
  ['endpoint-manager', '--namespace', 'default', '--listen', '127.0.0.1:0'],
];

test('without a kubeconfig or a cluster, every Kubernetes command says where it looked, and exits 2', async () => {
  const home = mkdtempSync(join(tmpdir(), 'tenantry-home-'));
  for (const args of COMMANDS) {
    // Only PATH and HOME: no KUBECONFIG, no KUBERNETES_SERVICE_HOST.
    const result = await runCli(args, { HOME: home });
    const command = args.slice(0, args[0] === 'bootstrap' ? 3 : 1).join(' ');
    assert.equal(result.code, 2, `${command}: ${result.stderr}`);
    assert.equal(result.stdout, '', command);
    const lines = result.stderr.trim().split('\n');
    assert.equal(lines.length, 1, `${command}: ${result.stderr}`);
    const [line = ''] = lines;
    assert.match(line, /^tenantry: no kubeconfig found and not running in a cluster: /, command);
    for (const place of [
      '--kubeconfig',
      'KUBECONFIG is not set',
      `${join(home, '.kube', 'config')} does not exist`,
      'KUBERNETES_SERVICE_HOST',
    ])
      assert.ok(line.includes(place), `${command} names ${place}: ${line}`);
    assert.match(line, /service account token/, command);
    assert.doesNotMatch(line, /HTTP protocol|skipTLSVerify|localhost:8080/, command);
  }
});
