import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import pino from 'pino';
import { stringify } from 'yaml';
import { ManualClock } from '../infra/clock.ts';
import { OsImageCatalogue } from './catalogue.ts';
import { ConfigMapSource } from './configmap-source.ts';
import { type CatalogueSource, FileSource } from './sources.ts';

const image = (name: string, extra: Record<string, string> = {}) => ({
  OS_NAME: name,
  CLOUD_USER: 'ubuntu',
  OS_IMAGE_URL: `https://images.example/${name.toLowerCase().replaceAll(' ', '-')}.qcow2`,
  ...extra,
});
const yaml = (...names: string[]) => stringify({ images: names.map((n) => image(n)) });
const names = (catalogue: OsImageCatalogue) => catalogue.images().map((i) => i.OS_NAME);

/** A source the test controls: its text, a failure, or a read that hangs until released. */
class ScriptedSource implements CatalogueSource {
  readonly description = 'scripted source';
  text = yaml('Ubuntu 24.04');
  failure: Error | undefined;
  hang = false;
  reads = 0;
  #release: (() => void) | undefined;

  async read(signal: AbortSignal): Promise<string> {
    this.reads++;
    if (this.hang) {
      await new Promise<void>((resolve, reject) => {
        this.#release = resolve;
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    }
    if (this.failure) throw this.failure;
    return this.text;
  }

  release(): void {
    this.#release?.();
  }
}

function setUp(options: { readTimeoutMs?: number } = {}) {
  const clock = new ManualClock();
  const source = new ScriptedSource();
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const catalogue = new OsImageCatalogue({ source, clock, logger: pino({ level: 'info' }, sink), ...options });
  return { clock, source, logs, catalogue };
}

describe('the OS image catalogue: 30-second cache, last good, never waiting on a read', () => {
  test('a changed source is read once 30 s have passed on the clock, not before; requests meanwhile get the cache', async () => {
    const { clock, source, catalogue } = setUp();
    await catalogue.refresh();
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04']);
    source.text = yaml('Ubuntu 24.04', 'Debian 12');
    clock.advance(29_999);
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04']);
    await catalogue.settled();
    assert.equal(source.reads, 1, 'no read within the 30 s window');
    clock.advance(1);
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04'], 'the request that finds the cache expired is not kept waiting');
    await catalogue.settled();
    assert.equal(source.reads, 2);
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04', 'Debian 12']);
    assert.equal(JSON.parse(catalogue.json().toString('utf8')).length, 2, 'the body follows the catalogue');
  });

  test('reads of an expired cache are shared: many requests, one read', async () => {
    const { clock, source, catalogue } = setUp();
    await catalogue.refresh();
    clock.advance(30_000);
    for (let i = 0; i < 50; i++) catalogue.images();
    await catalogue.settled();
    assert.equal(source.reads, 2);
  });

  test('a bad file keeps the last good catalogue served, logs each bad entry and field once, and is reported', async () => {
    const { clock, source, catalogue, logs } = setUp();
    await catalogue.refresh();
    const goodAt = catalogue.state().loaded_at;
    source.text = stringify({
      images: [image('Ubuntu 24.04'), image('Windows 11', { FIRMWARE_TYPE: 'bios' }), { OS_NAME: 'Nameless', MIN_VCPU: '0' }],
    });
    clock.advance(30_000);
    await catalogue.refresh();
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04'], 'the last good catalogue, not the good part of the bad file');
    const state = catalogue.state();
    assert.equal(state.status, 'invalid');
    assert.equal(state.loaded_at, goodAt);
    assert.equal(state.checked_at, clock.now().toISOString());
    assert.match(state.problem ?? '', /scripted source: 2 bad entries; serving the last good catalogue \(1 entries, read at /);
    const bad = logs.filter((l) => l.msg === 'os image catalogue: bad entry').map((l) => [l.entry, l.os_name, l.field]);
    assert.deepEqual(bad, [
      [1, 'Windows 11', 'FIRMWARE_TYPE'],
      [1, 'Windows 11', 'FEATURES'],
      [2, 'Nameless', 'CLOUD_USER'],
      [2, 'Nameless', 'OS_IMAGE_URL'],
      [2, 'Nameless', 'MIN_VCPU'],
    ]);
    assert.equal(logs.filter((l) => l.msg === 'os image catalogue refused').length, 1);

    clock.advance(30_000);
    await catalogue.refresh();
    assert.equal(logs.filter((l) => l.msg === 'os image catalogue: bad entry').length, 5, 'the same bad file is not logged again');
    assert.equal(catalogue.state().status, 'invalid');

    source.text = yaml('Ubuntu 24.04', 'Fedora 42');
    clock.advance(30_000);
    await catalogue.refresh();
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04', 'Fedora 42'], 'a fixed file replaces it');
    assert.equal(catalogue.state().status, 'ok');
    assert.equal(catalogue.state().problem, null);
  });

  test('a file that is bad from the start serves its good entries, and says so', async () => {
    const { source, catalogue } = setUp();
    source.text = stringify({ images: [image('Ubuntu 24.04'), { OS_NAME: 'Broken' }] });
    await catalogue.refresh();
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04']);
    assert.equal(catalogue.state().status, 'invalid');
    assert.match(catalogue.state().problem ?? '', /1 bad entry; serving the 1 good entries read at/);
  });

  test('not YAML at all: the last good catalogue stays, and the state names the line', async () => {
    const { clock, source, catalogue } = setUp();
    await catalogue.refresh();
    source.text = 'images:\n  - OS_NAME: a\n    OS_NAME: b\n';
    clock.advance(30_000);
    await catalogue.refresh();
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04']);
    assert.match(catalogue.state().problem ?? '', /is not valid YAML: Map keys must be unique/);
  });

  test('an unreadable source keeps the catalogue, is logged once, and recovers', async () => {
    const { clock, source, catalogue, logs } = setUp();
    await catalogue.refresh();
    source.failure = Object.assign(new Error('gone'), { code: 'ENOENT' });
    for (let i = 0; i < 3; i++) {
      clock.advance(30_000);
      await catalogue.refresh();
    }
    assert.deepEqual(names(catalogue), ['Ubuntu 24.04']);
    assert.equal(catalogue.state().status, 'unreadable');
    assert.match(catalogue.state().problem ?? '', /cannot read scripted source: no such file; serving the last good catalogue/);
    assert.equal(logs.filter((l) => l.msg === 'os image catalogue unreadable').length, 1);
    source.failure = undefined;
    clock.advance(30_000);
    await catalogue.refresh();
    assert.equal(catalogue.state().status, 'ok', 'the same text as before: served again, nothing to reparse');
  });

  test('a slow read never holds a request: the cache answers at once, and the read is abandoned after its timeout', async () => {
    const { clock, source, catalogue } = setUp({ readTimeoutMs: 50 });
    await catalogue.refresh();
    source.hang = true;
    source.text = yaml('Debian 12');
    clock.advance(30_000);
    // images() is synchronous: it cannot wait on the read, whatever the read does.
    for (let i = 0; i < 100; i++) assert.deepEqual(names(catalogue), ['Ubuntu 24.04']);
    assert.equal(source.reads, 2, 'the read started and still hangs');
    assert.equal(catalogue.state().status, 'ok');
    await catalogue.settled();
    assert.equal(source.reads, 2, 'one read, however many requests');
    assert.equal(catalogue.state().status, 'unreadable');
    assert.match(catalogue.state().problem ?? '', /no answer within 50 ms/);
    source.hang = false;
    clock.advance(30_000);
    await catalogue.refresh();
    assert.deepEqual(names(catalogue), ['Debian 12']);
  });

  test('the file source sees an edited file and a ConfigMap mount swapped by its symlink', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tenantry-images-'));
    try {
      // Like kubelet's layout: images.yaml -> a link that is atomically replaced to point at the new version.
      writeFileSync(join(dir, 'v1.yaml'), yaml('Ubuntu 24.04'));
      writeFileSync(join(dir, 'v2.yaml'), yaml('Alpine 3.21'));
      symlinkSync(join(dir, 'v1.yaml'), join(dir, 'data-link'));
      symlinkSync(join(dir, 'data-link'), join(dir, 'images.yaml'));
      const clock = new ManualClock();
      const catalogue = new OsImageCatalogue({
        source: new FileSource(join(dir, 'images.yaml')),
        clock,
        logger: pino({ level: 'silent' }),
      });
      await catalogue.refresh();
      assert.deepEqual(names(catalogue), ['Ubuntu 24.04']);
      symlinkSync(join(dir, 'v2.yaml'), join(dir, 'data-link.new'));
      renameSync(join(dir, 'data-link.new'), join(dir, 'data-link'));
      clock.advance(30_000);
      await catalogue.refresh();
      assert.deepEqual(names(catalogue), ['Alpine 3.21']);
      writeFileSync(join(dir, 'v2.yaml'), yaml('Alpine 3.21', 'Debian 12'));
      clock.advance(30_000);
      await catalogue.refresh();
      assert.deepEqual(names(catalogue), ['Alpine 3.21', 'Debian 12']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the ConfigMap source reads the images.yaml key and names what is missing', async () => {
    const data: Record<string, Record<string, string> | undefined> = {
      'kube-dc/images-configmap': { 'images.yaml': yaml('Rocky Linux 9') },
    };
    const api = {
      readNamespacedConfigMap: async ({ name, namespace }: { name: string; namespace: string }) => {
        const found = data[`${namespace}/${name}`];
        if (!found) throw new Error(`HTTP-Code: 404 configmaps "${name}" not found`);
        return { data: found };
      },
    };
    const source = new ConfigMapSource(api, 'kube-dc');
    assert.equal(source.description, 'configmap kube-dc/images-configmap');
    const clock = new ManualClock();
    const catalogue = new OsImageCatalogue({ source, clock, logger: pino({ level: 'silent' }) });
    await catalogue.refresh();
    assert.deepEqual(names(catalogue), ['Rocky Linux 9']);
    data['kube-dc/images-configmap'] = { 'other.yaml': 'x' };
    clock.advance(30_000);
    await catalogue.refresh();
    assert.match(catalogue.state().problem ?? '', /configmap kube-dc\/images-configmap has no key images.yaml/);
    assert.match(
      (await new ConfigMapSource(api, 'elsewhere').read(new AbortController().signal).catch((e: Error) => e)).toString(),
      /not found/,
    );
  });
});
