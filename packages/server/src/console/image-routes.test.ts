import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { assertError, http } from '../../test/client.ts';
import { consoleCookie } from '../../test/console-session.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, refreshTokens, type Tokens } from '../../test/provisioning.ts';

const ENTRY = {
  OS_NAME: 'Ubuntu 24.04 LTS',
  CLOUD_USER: 'ubuntu',
  OS_IMAGE_URL: 'https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img',
  MIN_MEMORY: '1G',
  MIN_VCPU: '1',
  MIN_STORAGE: '20G',
  FIRMWARE_TYPE: 'bios',
  MACHINE_TYPE: 'q35',
  FEATURES: 'acpi',
  CLOUD_INIT: '#cloud-config\npackages:\n  - qemu-guest-agent\n',
};
const WINDOWS = {
  OS_NAME: 'Windows 11 Enterprise',
  CLOUD_USER: 'Administrator',
  OS_IMAGE_URL: 'https://images.example.com/w11.qcow2',
  FIRMWARE_TYPE: 'efi',
  FEATURES: 'acpi,apic,hyperv,smm,tpm',
  BOOT_ORDER: 'disk',
  ADDITIONAL_DISKS: 'virtio-drivers',
};

for (const target of testDatabases()) {
  describe(`GET /api/create-vm/{namespace}/os-images [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    let dir: string;
    let file: string;
    let alice: string;
    const images = (namespace: string, cookie?: string) =>
      http<unknown[]>(server.partnerUrl, 'GET', `/api/create-vm/${namespace}/os-images`, cookie ? { headers: { cookie } } : {});
    /** Moves past the cache window and lets the one background read finish. */
    const nextWindow = async () => {
      server.clock.advance(30_000);
      await images('catalogue-acme-default', alice);
      await server.services.images.settled();
    };

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'tenantry-os-images-'));
      file = join(dir, 'images.yaml');
      // An unknown key (the chart's provenance field) is a warning: the entry is served without it.
      writeFileSync(file, stringify({ images: [{ ...ENTRY, OS_IMAGE_SHA256: 'abc' }, WINDOWS] }));
      server = await startTestServer(target, { env: { TENANTRY_OS_IMAGES_FILE: file } });
      p = await partnerWithModes(server, 'catalogue');
      await activeCustomer(server, p.live, 'acme', { owner: { username: 'alice', email: 'alice@acme.example' } });
      await activeCustomer(server, p.live, 'globex', { owner: { username: 'bob', email: 'bob@globex.example' } });
      alice = (await consoleCookie(server, p.live, 'acme', 'alice')).cookie;
    });
    after(async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    test("200: a bare JSON array of the file's entries with the seed's fields only", async () => {
      const result = await images('catalogue-acme-default', alice);
      assert.equal(result.status, 200, result.text);
      assert.match(result.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(result.headers.get('cache-control'), 'private, no-store');
      assert.match(result.headers.get('x-request-id') ?? '', /^req_/);
      assert.deepEqual(result.body, [ENTRY, WINDOWS]);
    });

    test('401 UNAUTHORIZED without a session, with an unknown one, and once the session has expired; in the envelope', async () => {
      assertError(await images('catalogue-acme-default'), 401, 'UNAUTHORIZED');
      assertError(await images('catalogue-acme-default', 'tenantry_console=forged'), 401, 'UNAUTHORIZED');
      const carol = (await consoleCookie(server, p.live, 'acme', 'alice')).cookie;
      assert.equal((await images('catalogue-acme-default', carol)).status, 200);
      server.clock.advance(12 * 3600 * 1000);
      assertError(await images('catalogue-acme-default', carol), 401, 'UNAUTHORIZED');
      await refreshTokens(server, p);
      alice = (await consoleCookie(server, p.live, 'acme', 'alice')).cookie;
    });

    test('a session seen in the last 2 s is read from memory, with the same bytes and headers; a revocation shows within 2 s', async () => {
      const { cookie } = await consoleCookie(server, p.live, 'acme', 'alice');
      const first = await images('catalogue-acme-default', cookie);
      const original = server.services.console.session.bind(server.services.console);
      let reads = 0;
      server.services.console.session = (id) => {
        reads++;
        return original(id);
      };
      try {
        const second = await images('catalogue-acme-default', cookie);
        assert.equal(reads, 0, 'no database read for a cached session');
        // Among other cookies, in one header or in several, as browsers and proxies send them.
        const among = await images('catalogue-acme-default', `theme=dark; ${cookie}; lang=en`);
        const split = await new Promise<{ status?: number; id: unknown }>((resolve, reject) => {
          const url = `${server.partnerUrl}/api/create-vm/catalogue-acme-default/os-images`;
          // Two header lines, which fetch would join into one (a list of headers gets no Host of its own).
          const headers = ['host', new URL(url).host, 'cookie', 'theme=dark', 'cookie', cookie];
          httpGet(url, { headers }, (response) => {
            response.resume();
            resolve({ status: response.statusCode, id: response.headers['x-request-id'] });
          }).on('error', reject);
        });
        assert.deepEqual([among.status, split.status], [200, 200]);
        assert.equal(reads, 0);
        assert.equal(second.text, first.text);
        for (const header of ['content-type', 'cache-control', 'content-length'])
          assert.equal(second.headers.get(header), first.headers.get(header), header);
        assert.notEqual(second.headers.get('x-request-id'), first.headers.get('x-request-id'));
        // Every read has its access line, as every other request.
        for (const id of [
          first.headers.get('x-request-id'),
          second.headers.get('x-request-id'),
          among.headers.get('x-request-id'),
          split.id,
        ]) {
          const line = server.logs.find((l) => l.request_id === id);
          assert.deepEqual(
            [line?.level, line?.msg, line?.route, line?.status, line?.api],
            [30, 'request', '/api/create-vm/:namespace/os-images', 200, 'partner-api'],
          );
        }
        // Another namespace or a query string: their errors.
        assertError(await images('catalogue-globex-default', cookie), 404, 'NOT_FOUND');
        assertError(
          await http(server.partnerUrl, 'GET', '/api/create-vm/catalogue-acme-default/os-images?x=1', { headers: { cookie } }),
          400,
          'VALIDATION_ERROR',
        );
        await server.database.db.deleteFrom('console_sessions').execute();
        assert.equal((await images('catalogue-acme-default', cookie)).status, 200, 'within the 2 s a revoked session still reads the list');
        server.clock.advance(2_000);
        assertError(await images('catalogue-acme-default', cookie), 401, 'UNAUTHORIZED');
      } finally {
        server.services.console.session = original;
        alice = (await consoleCookie(server, p.live, 'acme', 'alice')).cookie;
      }
    });

    test("404 NOT_FOUND for another customer's namespace and for one that does not exist, alike", async () => {
      const other = assertError(await images('catalogue-globex-default', alice), 404, 'NOT_FOUND');
      const none = assertError(await images('nobody-default', alice), 404, 'NOT_FOUND');
      assert.equal(other.message, 'Namespace catalogue-globex-default does not exist.');
      assert.equal(none.message, 'Namespace nobody-default does not exist.');
      const bob = (await consoleCookie(server, p.live, 'globex', 'bob')).cookie;
      assert.equal((await images('catalogue-globex-default', bob)).status, 200);
      assertError(await images('catalogue-acme-default', bob), 404, 'NOT_FOUND');
    });

    test('a changed file is served within 30 s, without a restart', async () => {
      // The window starts with a read now: the tests before moved the clock past the last one's, and
      // the catalogue's own tick (every real second) could otherwise read the file before the 30 s.
      await nextWindow();
      writeFileSync(file, stringify({ images: [WINDOWS, { ...ENTRY, OS_NAME: 'Ubuntu 26.04 LTS' }] }));
      server.clock.advance(29_000);
      assert.deepEqual(
        (await images('catalogue-acme-default', alice)).body.map((i) => (i as { OS_NAME: string }).OS_NAME),
        ['Ubuntu 24.04 LTS', 'Windows 11 Enterprise'],
      );
      server.clock.advance(1_000);
      await images('catalogue-acme-default', alice);
      await server.services.images.settled();
      assert.deepEqual(
        (await images('catalogue-acme-default', alice)).body.map((i) => (i as { OS_NAME: string }).OS_NAME),
        ['Windows 11 Enterprise', 'Ubuntu 26.04 LTS'],
      );
    });

    test('a bad file: the last good catalogue stays served, each bad field is logged, /readyz reports it and stays ready', async () => {
      const before = (await images('catalogue-acme-default', alice)).body;
      writeFileSync(file, stringify({ images: [ENTRY, { ...WINDOWS, FIRMWARE_TYPE: 'bios' }, { OS_NAME: 'Half' }] }));
      await nextWindow();
      assert.deepEqual((await images('catalogue-acme-default', alice)).body, before);
      const logged = server.logs.filter((l) => l.msg === 'os image catalogue: bad entry').map((l) => [l.entry, l.os_name, l.field]);
      assert.deepEqual(logged, [
        [1, 'Windows 11 Enterprise', 'FIRMWARE_TYPE'],
        [2, 'Half', 'CLOUD_USER'],
        [2, 'Half', 'OS_IMAGE_URL'],
      ]);
      for (const base of [server.partnerUrl, server.operatorUrl]) {
        const ready = await http<{ status: string; details: { os_images: Record<string, unknown> } }>(base, 'GET', '/readyz');
        assert.equal(ready.status, 200);
        assert.equal(ready.body.details.os_images.status, 'invalid');
        assert.equal(ready.body.details.os_images.source, `file ${file}`);
        assert.equal(ready.body.details.os_images.entries, 2);
        assert.match(String(ready.body.details.os_images.problem), /2 bad entries; serving the last good catalogue/);
      }

      writeFileSync(file, stringify({ images: [ENTRY] }));
      await nextWindow();
      assert.deepEqual((await images('catalogue-acme-default', alice)).body, [ENTRY]);
      const ready = await http<{ details: { os_images: Record<string, unknown> } }>(server.partnerUrl, 'GET', '/readyz');
      assert.equal(ready.body.details.os_images.status, 'ok');
    });

    test('a file that disappears keeps the catalogue served and is reported unreadable', async () => {
      rmSync(file);
      await nextWindow();
      assert.deepEqual((await images('catalogue-acme-default', alice)).body, [ENTRY]);
      const ready = await http<{ details: { os_images: Record<string, unknown> } }>(server.partnerUrl, 'GET', '/readyz');
      assert.equal(ready.body.details.os_images.status, 'unreadable');
      assert.match(String(ready.body.details.os_images.problem), /no such file/);
      writeFileSync(file, stringify({ images: [ENTRY] }));
    });
  });
}
