import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { stringify } from 'yaml';
import { KubeApi } from '../../test/kube-api/index.ts';
import { ManualClock } from '../infra/clock.ts';
import { OsImageCatalogue } from './catalogue.ts';
import { ConfigMapSource } from './configmap-source.ts';
import { catalogueSourceFor } from './source-for.ts';

const image = (name: string) => ({
  OS_NAME: name,
  CLOUD_USER: 'ubuntu',
  OS_IMAGE_URL: `https://images.example/${name.replaceAll(' ', '-')}.qcow2`,
});
const imagesYaml = (...names: string[]) => stringify({ images: names.map(image) });
const names = (catalogue: OsImageCatalogue) => catalogue.images().map((i) => i.OS_NAME);

/**
 * The `kubernetes` platform's source: the `images-configmap` ConfigMap read through the real
 * `@kubernetes/client-node`, against the shared Kubernetes API double (test/kube-api).
 */
describe('the images-configmap ConfigMap as the catalogue source', () => {
  let kube: KubeApi;
  const configMap = (data: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'images-configmap', namespace: 'kube-dc' },
    data,
  });
  const setUp = (readTimeoutMs?: number) => {
    const clock = new ManualClock();
    const source = ConfigMapSource.fromKubeConfig(kube.kubeConfig('tenantry'), 'kube-dc');
    const catalogue = new OsImageCatalogue({
      source,
      clock,
      logger: pino({ level: 'silent' }),
      ...(readTimeoutMs ? { readTimeoutMs } : {}),
    });
    const next = async () => {
      clock.advance(30_000);
      await catalogue.refresh();
    };
    return { catalogue, next };
  };

  before(async () => {
    kube = await KubeApi.start();
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-dc' } });
    kube.create(configMap({ 'images.yaml': imagesYaml('Ubuntu 24.04', 'Debian 12') }));
  });
  after(() => kube.close());

  test('reads images.yaml from the ConfigMap, as the service account it runs as, and sees an edit at the next read', async () => {
    const { catalogue, next } = setUp();
    await catalogue.refresh();
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04', 'Debian 12']);
    assert.equal(catalogue.state().source, 'configmap kube-dc/images-configmap');
    const reads = kube.requests((r) => r.resource === 'configmaps' && r.user === 'tenantry');
    assert.deepEqual(
      reads.map((r) => [r.verb, r.namespace, r.name, r.status]),
      [['get', 'kube-dc', 'images-configmap', 200]],
    );
    kube.patch('v1', 'ConfigMap', 'images-configmap', 'kube-dc', { data: { 'images.yaml': imagesYaml('Rocky Linux 9') } });
    await next();
    assert.deepEqual(names(catalogue), ['Rocky Linux 9']);
  });

  test('a bad edit keeps the last good catalogue; a missing key or ConfigMap, or a failing API, leaves it served and says why', async () => {
    const { catalogue, next } = setUp();
    await catalogue.refresh();
    const good = names(catalogue);
    kube.patch('v1', 'ConfigMap', 'images-configmap', 'kube-dc', {
      data: { 'images.yaml': stringify({ images: [{ ...image('Windows 11'), FIRMWARE_TYPE: 'bios' }] }) },
    });
    await next();
    assert.deepEqual(names(catalogue), good);
    assert.equal(catalogue.state().status, 'invalid');

    kube.update(configMap({ 'other.yaml': 'x' }) as never);
    await next();
    assert.equal(catalogue.state().status, 'unreadable');
    assert.match(catalogue.state().problem ?? '', /configmap kube-dc\/images-configmap has no key images.yaml/);

    kube.faults.failNext({ status: 503, match: (r) => r.resource === 'configmaps' });
    await next();
    assert.match(catalogue.state().problem ?? '', /cannot read configmap kube-dc\/images-configmap: .*503/);

    kube.delete('v1', 'ConfigMap', 'images-configmap', 'kube-dc');
    await next();
    assert.match(catalogue.state().problem ?? '', /404|not ?found/i);
    assert.deepEqual(names(catalogue), good, 'still the last good catalogue');

    kube.create(configMap({ 'images.yaml': imagesYaml('Alpine 3.21') }));
    await next();
    assert.deepEqual(names(catalogue), ['Alpine 3.21']);
    assert.equal(catalogue.state().status, 'ok');
  });

  test('a slow API server: the read is abandoned after its timeout, the cached catalogue answers meanwhile', async () => {
    const { catalogue, next } = setUp(100);
    await catalogue.refresh();
    kube.faults.delay(2_000, { count: 1, match: (r) => r.resource === 'configmaps' });
    await next();
    assert.deepEqual(names(catalogue), ['Alpine 3.21']);
    assert.match(catalogue.state().problem ?? '', /no answer within 100 ms/);
  });

  test("on the kubernetes platform without TENANTRY_OS_IMAGES_FILE, the server reads the ConfigMap through the driver's kubeconfig and namespace", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tenantry-kubeconfig-'));
    try {
      const kubeconfig = await kube.writeKubeconfig(join(dir, 'config'), 'tenantry');
      kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-dc-system' } });
      kube.create({
        ...configMap({ 'images.yaml': imagesYaml('Fedora 42') }),
        metadata: { name: 'images-configmap', namespace: 'kube-dc-system' },
      });
      // TENANTRY_KUBECONFIG as the driver uses it (not $KUBECONFIG), and Kube-DC's namespace
      // (TENANTRY_KUBE_DC_NAMESPACE), where Kube-DC's chart writes its catalogue.
      const source = await catalogueSourceFor({
        osImagesFile: undefined,
        cluster: { kubeconfig, namespace: 'kube-dc-system' },
      });
      assert.equal(source.description, 'configmap kube-dc-system/images-configmap');
      const catalogue = new OsImageCatalogue({ source, clock: new ManualClock(), logger: pino({ level: 'silent' }) });
      await catalogue.refresh();
      assert.deepEqual(names(catalogue), ['Fedora 42']);
      const file = await catalogueSourceFor({
        osImagesFile: '/etc/tenantry/images.yaml',
        cluster: { kubeconfig, namespace: 'kube-dc-system' },
      });
      assert.equal(file.description, 'file /etc/tenantry/images.yaml', 'a mounted file wins');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
