import assert from 'node:assert/strict';
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, describe, test } from 'node:test';
import { parseSecretKeys } from '../../src/infra/secrets/secret-key.ts';
import { createPartner, operatorApi } from '../client.ts';
import { KubeApi } from '../kube-api/index.ts';
import { spawnServe } from '../serve-process.ts';
import { lint, type RenderedObject, template, templateAgainst } from './helm.ts';
import { validateObject } from './schemas.ts';

interface EnvVar {
  name: string;
  valueFrom?: { secretKeyRef: { name: string; key: string } };
}
interface ServeDeployment {
  spec: {
    replicas: number;
    strategy: { type: string };
    template: {
      spec: {
        containers: Array<{
          env: EnvVar[];
          envFrom: Array<{ configMapRef: { name: string } }>;
          volumeMounts: Array<{ name: string; mountPath: string }>;
        }>;
        volumes: Array<{ name: string; persistentVolumeClaim?: { claimName: string }; emptyDir?: object }>;
      };
    };
  };
}

function render(values: Record<string, unknown> = {}): RenderedObject[] {
  const { objects, error } = template(values);
  assert.equal(error, undefined, error ?? '');
  for (const object of objects) validateObject(object);
  return objects;
}

function find(objects: RenderedObject[], kind: string, name: string): RenderedObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  assert.ok(found, `${kind} ${name} is rendered`);
  return found;
}

const deploymentOf = (objects: RenderedObject[]) => find(objects, 'Deployment', 'tenantry') as unknown as ServeDeployment;
const containerOf = (objects: RenderedObject[]) =>
  deploymentOf(objects).spec.template.spec.containers[0] as ServeDeployment['spec']['template']['spec']['containers'][0];
const dataVolume = (objects: RenderedObject[]) => deploymentOf(objects).spec.template.spec.volumes.find((v) => v.name === 'data');

function secretValue(objects: RenderedObject[], name: string, key: string): string {
  const data = (find(objects, 'Secret', name) as unknown as { data: Record<string, string> }).data;
  assert.ok(data[key], `Secret ${name} holds ${key}`);
  return Buffer.from(data[key], 'base64').toString('utf8');
}

/** Where each secret variable of `tenantry serve` comes from: `VARIABLE secret/key`. */
const secretRefs = (objects: RenderedObject[]) =>
  containerOf(objects)
    .env.filter((e) => e.valueFrom)
    .map((e) => `${e.name} ${e.valueFrom?.secretKeyRef.name}/${e.valueFrom?.secretKeyRef.key}`);

/**
 * The container's environment as the kubelet makes it (the ConfigMap, then each variable's Secret), with
 * the data volume at `volume` instead of its mount path and loopback listeners.
 */
function podEnvironment(objects: RenderedObject[], volume: string): Record<string, string> {
  const container = containerOf(objects);
  const configMap = container.envFrom[0]?.configMapRef.name ?? '';
  const env: Record<string, string> = { ...(find(objects, 'ConfigMap', configMap) as unknown as { data: Record<string, string> }).data };
  for (const variable of container.env) {
    const ref = variable.valueFrom?.secretKeyRef;
    if (ref) env[variable.name] = secretValue(objects, ref.name, ref.key);
  }
  const mount = container.volumeMounts.find((m) => m.name === 'data')?.mountPath ?? '';
  const inVolume = relative(mount, env.TENANTRY_DATA_DIR ?? '');
  assert.ok(
    inVolume !== '' && !inVolume.startsWith('..'),
    `the data directory ${env.TENANTRY_DATA_DIR} is a folder of the volume ${mount}`,
  );
  return { ...env, TENANTRY_DATA_DIR: join(volume, inVolume), TENANTRY_LISTEN: '127.0.0.1:0', TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0' };
}

/** What the kubelet does to a volume with fsGroup on each mount: group read and write on everything. */
function openToGroup(path: string): void {
  const stat = lstatSync(path);
  chmodSync(path, (stat.mode & 0o7777) | (stat.isDirectory() ? 0o2070 : 0o060));
  if (stat.isDirectory()) for (const name of readdirSync(path)) openToGroup(join(path, name));
}

describe('chart: installed with no values', () => {
  const dirs: string[] = [];
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  test('one replica on the embedded database, on a claim the chart makes; token and key generated into kept Secrets', () => {
    assert.equal(lint({}).status, 0, lint({}).stdout);
    const objects = render();
    assert.deepEqual(objects.map((o) => `${o.kind} ${o.metadata.name}`).sort(), [
      'ConfigMap tenantry',
      'Deployment tenantry',
      'PersistentVolumeClaim tenantry-data',
      'Secret tenantry-operator-token',
      'Secret tenantry-secret-key',
      'Service tenantry',
      'Service tenantry-operator',
      'ServiceAccount tenantry',
    ]);
    const deployment = deploymentOf(objects);
    assert.equal(deployment.spec.replicas, 1);
    assert.equal(deployment.spec.strategy.type, 'Recreate');
    // One host name for every pod of the claim: a replacement takes over a dead pod's lock.
    assert.equal((deployment.spec.template.spec as { hostname?: string }).hostname, 'tenantry');
    assert.deepEqual(secretRefs(objects), [
      'TENANTRY_OPERATOR_TOKEN tenantry-operator-token/token',
      'TENANTRY_SECRET_KEY tenantry-secret-key/key',
    ]);
    assert.deepEqual(dataVolume(objects), { name: 'data', persistentVolumeClaim: { claimName: 'tenantry-data' } });
    const claim = find(objects, 'PersistentVolumeClaim', 'tenantry-data') as unknown as { spec: unknown };
    assert.deepEqual(claim.spec, { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '8Gi' } } });
    for (const name of ['tenantry-data', 'tenantry-operator-token', 'tenantry-secret-key']) {
      const object = objects.find((o) => o.metadata.name === name);
      assert.equal(object?.metadata.annotations?.['helm.sh/resource-policy'], 'keep', `${name} outlives helm uninstall`);
    }
    // The formats the server makes itself: 32 random bytes as base64url, and as 64 hex characters.
    const token = secretValue(objects, 'tenantry-operator-token', 'token');
    const key = secretValue(objects, 'tenantry-secret-key', 'key');
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.match(key, /^[0-9a-f]{64}$/);
    assert.equal(parseSecretKeys(key, 'TENANTRY_SECRET_KEY').length, 1);
    const again = render();
    assert.notEqual(secretValue(again, 'tenantry-operator-token', 'token'), token, 'random, not a constant');
    assert.notEqual(secretValue(again, 'tenantry-secret-key', 'key'), key, 'random, not a constant');
  });

  test('with a PostgreSQL Secret: serve.replicas processes rolling, no claim; named Secrets replace the generated ones', () => {
    const postgres = render({ serve: { database: { secretName: 'tenantry-db' } } });
    const deployment = deploymentOf(postgres);
    assert.equal(deployment.spec.replicas, 2);
    assert.equal(deployment.spec.strategy.type, 'RollingUpdate');
    assert.equal((deployment.spec.template.spec as { hostname?: string }).hostname, undefined, 'replicas keep their own host names');
    assert.equal(postgres.filter((o) => o.kind === 'PersistentVolumeClaim').length, 0);
    assert.deepEqual(dataVolume(postgres), { name: 'data', emptyDir: {} });
    assert.deepEqual(secretRefs(postgres), [
      'TENANTRY_DATABASE_URL tenantry-db/url',
      'TENANTRY_OPERATOR_TOKEN tenantry-operator-token/token',
      'TENANTRY_SECRET_KEY tenantry-secret-key/key',
    ]);
    assert.equal(deploymentOf(render({ serve: { replicas: 5 } })).spec.replicas, 1, 'the embedded database is one process');

    const named = render({
      serve: {
        operatorToken: { secretName: 'ops', secretKey: 't' },
        secretKey: { secretName: 'keys' },
        persistence: { existingClaim: 'mine' },
      },
    });
    assert.deepEqual(secretRefs(named), ['TENANTRY_OPERATOR_TOKEN ops/t', 'TENANTRY_SECRET_KEY keys/key']);
    assert.equal(named.filter((o) => o.kind === 'Secret' || o.kind === 'PersistentVolumeClaim').length, 0);
    assert.deepEqual(dataVolume(named), { name: 'data', persistentVolumeClaim: { claimName: 'mine' } });
  });

  test("the pod's environment starts tenantry serve on the volume, again after the kubelet regroups it; another key cannot open it", async () => {
    const objects = render();
    const volume = mkdtempSync(join(tmpdir(), 'tenantry-volume-'));
    dirs.push(volume);
    chmodSync(volume, 0o2775);
    const env = podEnvironment(objects, volume);
    const token = env.TENANTRY_OPERATOR_TOKEN ?? '';
    let server = await spawnServe(env);
    try {
      await createPartner({ ...server, operatorToken: token }, 'acme');
      assert.equal((await operatorApi({ ...server, operatorToken: `${token}x` }, 'GET', '/partners')).status, 401);
    } finally {
      assert.equal(await server.stop(), 0);
    }
    openToGroup(volume);
    server = await spawnServe(env);
    try {
      const listed = await operatorApi<{ data: Array<{ id: string }> }>({ ...server, operatorToken: token }, 'GET', '/partners');
      assert.deepEqual(
        listed.body.data.map((p) => p.id),
        ['acme'],
      );
    } finally {
      await server.stop();
    }
    // What an upgrade would start with if the Secret were generated again instead of read back.
    const fresh = podEnvironment(render(), volume);
    await assert.rejects(
      spawnServe({ ...env, TENANTRY_SECRET_KEY: fresh.TENANTRY_SECRET_KEY ?? '' }),
      /TENANTRY_SECRET_KEY: the database's token_signing_key is sealed with secret key \S+, which this process does not have/,
    );
  });

  test('an upgrade reads the generated Secrets back from the cluster (lookup), so they never change', async () => {
    const kube = await KubeApi.start();
    kube.registerResource({ group: '', version: 'v1', kind: 'PersistentVolumeClaim', plural: 'persistentvolumeclaims', namespaced: true });
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'tenantry' } });
    const dir = mkdtempSync(join(tmpdir(), 'tenantry-lookup-'));
    dirs.push(dir);
    const kubeconfig = await kube.writeKubeconfig(join(dir, 'kubeconfig'), 'admin', 'tenantry');
    try {
      const install = await templateAgainst(kubeconfig);
      assert.equal(install.error, undefined, install.error ?? '');
      const asked = kube.requests((r) => r.verb === 'get' && r.resource === 'secrets').map((r) => r.name);
      assert.deepEqual([...new Set(asked)].sort(), ['tenantry-operator-token', 'tenantry-secret-key']);
      // What the install leaves in the cluster: the Secrets, owned by the release.
      for (const secret of install.objects.filter((o) => o.kind === 'Secret')) {
        const owner = { 'meta.helm.sh/release-name': 'tenantry', 'meta.helm.sh/release-namespace': 'tenantry' };
        kube.create({ ...secret, metadata: { ...secret.metadata, annotations: { ...secret.metadata.annotations, ...owner } } });
      }
      const upgrade = await templateAgainst(kubeconfig);
      assert.equal(upgrade.error, undefined, upgrade.error ?? '');
      for (const [name, key] of [
        ['tenantry-operator-token', 'token'],
        ['tenantry-secret-key', 'key'],
      ] as const) {
        assert.equal(secretValue(upgrade.objects, name, key), secretValue(install.objects, name, key), `${name} is read back`);
      }
    } finally {
      await kube.close();
    }
  });
});
