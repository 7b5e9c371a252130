import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createPartner, exchange, issueKey, partnerApi } from './client.ts';
import { kubectl } from './kube-api/kubectl-run.ts';
import { type ServeProcess, spawnServe } from './serve-process.ts';

const BIN = fileURLToPath(new URL('../../dev-cluster/bin/tenantry-dev-cluster.js', import.meta.url));

/** `KEY=value` lines, as `set -a; . file` reads them. */
function envFile(path: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

/**
 * The README's walkthrough of the kubernetes platform on a laptop: `tenantry-dev-cluster --dir DIR`
 * says it is ready, `tenantry serve` started with DIR/tenantry.env provisions a live customer on it
 * (its Organization, its realm, its Project), the real kubectl reads them with DIR/kubeconfig, and the
 * cluster stops on SIGTERM.
 */
describe('tenantry-dev-cluster', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tenantry-dev-cluster-'));
  let cluster: ChildProcess | undefined;
  let serve: ServeProcess | undefined;
  after(async () => {
    await serve?.stop('SIGKILL');
    cluster?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('a live customer of `tenantry serve` becomes an Organization with its realm and Project on the local cluster', async () => {
    cluster = spawn(process.execPath, [BIN, '--dir', join(dir, 'cluster')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    await new Promise<void>((resolve, reject) => {
      cluster?.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8');
        if (output.includes('ready')) resolve();
      });
      cluster?.stderr?.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8');
      });
      cluster?.once('exit', (code) => reject(new Error(`tenantry-dev-cluster exited with ${code}: ${output}`)));
    });
    const env = envFile(join(dir, 'cluster', 'tenantry.env'));
    assert.equal(env.TENANTRY_PLATFORM, 'kubernetes');
    serve = await spawnServe({ ...env, TENANTRY_DATA_DIR: join(dir, 'data'), TENANTRY_OPERATOR_TOKEN: 'dev-cluster-operator-token' });
    const urls = { partnerUrl: serve.partnerUrl, operatorUrl: serve.operatorUrl, operatorToken: 'dev-cluster-operator-token' };
    await createPartner(urls, 'laptop', { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 } });
    const key = await issueKey(urls, 'laptop');
    let token = '';
    for (let i = 0; i < 100 && !token; i++) {
      token = (await exchange(urls, key)).body.access_token ?? '';
      if (!token) await new Promise((ok) => setTimeout(ok, 100));
    }
    const created = await partnerApi<{ data: { operation: { id: string } } }>(urls, 'POST', '/customers', {
      token,
      body: { id: 'globex', owner: { username: 'alice', email: 'alice@globex.example' } },
    });
    assert.equal(created.status, 202, created.text);
    let status = 'pending';
    for (let i = 0; i < 600 && (status === 'pending' || status === 'running'); i++) {
      const op = await partnerApi<{ data: { status: string; error: unknown } }>(
        urls,
        'GET',
        `/customers/globex/operations/${created.body.data.operation.id}`,
        { token },
      );
      status = op.body.data.status;
      if (status === 'failed') assert.fail(`provisioning failed: ${JSON.stringify(op.body.data.error)}`);
      await new Promise((ok) => setTimeout(ok, 100));
    }
    assert.equal(status, 'succeeded');

    const kubeconfig = join(dir, 'cluster', 'kubeconfig');
    const organizations = await kubectl(kubeconfig, ['--context', 'admin', 'get', 'organizations', '-A', '-o', 'json']);
    assert.equal(organizations.code, 0, organizations.stderr);
    const names = (JSON.parse(organizations.stdout) as { items: { metadata: { name: string } }[] }).items.map((o) => o.metadata.name);
    assert.deepEqual(names, ['laptop-globex']);
    const project = await kubectl(kubeconfig, ['--context', 'admin', 'get', 'namespace', 'laptop-globex-default', '-o', 'json']);
    assert.equal(project.code, 0, project.stderr);
    assert.equal(
      (JSON.parse(project.stdout) as { metadata: { labels: Record<string, string> } }).metadata.labels['kube-dc.com/project'],
      '',
    );

    await serve.stop('SIGTERM');
    cluster.kill('SIGTERM');
    const [code] = (await once(cluster, 'exit')) as [number | null];
    assert.equal(code, 0, 'the cluster stops cleanly on SIGTERM');
  });
});
