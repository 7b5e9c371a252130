import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, http, partnerApi } from '../../test/client.ts';
import { consoleCookie, csrfFrom, loginUrl } from '../../test/console-session.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, eventually, partnerWithModes, type Tokens } from '../../test/provisioning.ts';

const UBUNTU = 'Ubuntu 24.04 LTS';

for (const target of testDatabases()) {
  describe(`the console's VM form [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    let alice: { cookie: string; csrf: string };
    let bob: { cookie: string; csrf: string };

    const page = (cookie: string, query = '') => http(server.partnerUrl, 'GET', `/console${query}`, { headers: { cookie } });
    const signIn = async (customer: string, username: string, token = p.live) => {
      const { cookie } = await consoleCookie(server, token, customer, username);
      return { cookie, csrf: csrfFrom((await page(cookie)).text) };
    };
    const post = (
      session: { cookie: string; csrf?: string } | undefined,
      fields: Record<string, string>,
      headers?: Record<string, string>,
    ) =>
      fetch(`${server.partnerUrl}/console/vms`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...(headers ?? { origin: new URL(server.partnerUrl).origin }),
          ...(session ? { cookie: session.cookie } : {}),
        },
        body: new URLSearchParams({ ...(session?.csrf ? { csrf: session.csrf } : {}), ...fields }),
      });
    const vm = (name: string, extra: Record<string, string> = {}) => ({
      project: 'default',
      name,
      os: UBUNTU,
      vcpu: '1',
      memory_gib: '2',
      storage_gib: '20',
      ...extra,
    });

    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'vms');
      await activeCustomer(server, p.live, 'acme', { owner: { username: 'alice', email: 'alice@acme.example' } });
      await activeCustomer(server, p.live, 'globex', { owner: { username: 'bob', email: 'bob@globex.example' } });
      alice = await signIn('acme', 'alice');
      bob = await signIn('globex', 'bob');
    });
    after(() => server.stop());

    test('the session cookie is HttpOnly, SameSite=Lax, for the whole site, and not Secure on an http public URL', async () => {
      const { setCookie } = await consoleCookie(server, p.live, 'acme', 'alice');
      assert.match(setCookie, /; HttpOnly/);
      assert.match(setCookie, /; SameSite=Lax/);
      assert.match(setCookie, /; Path=\//);
      assert.doesNotMatch(setCookie, /Secure/);
    });

    test('the cookie is Secure when the public URL is https', async () => {
      const https = await startTestServer(target, { env: { TENANTRY_PUBLIC_URL: 'https://console.example.test' } });
      try {
        const tokens = await partnerWithModes(https, 'secure');
        await activeCustomer(https, tokens.live, 'acme', { owner: { username: 'alice', email: 'alice@acme.example' } });
        const url = new URL(await loginUrl(https, tokens.live, 'acme', 'alice'));
        assert.equal(url.origin, 'https://console.example.test');
        const opened = await fetch(`${https.partnerUrl}${url.pathname}`, { redirect: 'manual' });
        assert.match(opened.headers.get('set-cookie') ?? '', /; Secure/);
      } finally {
        await https.stop();
      }
    });

    test('the page works under a strict Content-Security-Policy: no inline script or style, no framing', async () => {
      const result = await page(alice.cookie);
      assert.equal(result.status, 200);
      const csp = result.headers.get('content-security-policy') ?? '';
      for (const directive of [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
      ]) {
        assert.ok(csp.includes(directive), `${directive} in ${csp}`);
      }
      assert.equal(result.headers.get('x-frame-options'), 'DENY');
      assert.equal(result.headers.get('cache-control'), 'no-store');
      assert.doesNotMatch(result.text, /<script(?![^>]*\ssrc=)/, 'every script is a file');
      assert.doesNotMatch(result.text, /<style|\sstyle=|\son[a-z]+=/i, 'no inline style or handler');
      const script = await fetch(`${server.partnerUrl}/console/assets/console.js`);
      assert.equal(script.status, 200);
      assert.match(script.headers.get('content-type') ?? '', /^text\/javascript/);
      assert.match(await script.text(), /\/api\/create-vm\//);
      assert.equal((await fetch(`${server.partnerUrl}/console/assets/../service.ts`)).status, 404);
    });

    test("cross-site posts are refused: no origin, another origin, no token, another session's token", async () => {
      const refused = async (response: Response, status: number) => {
        assert.equal(response.status, status);
        assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
        assert.match(response.headers.get('x-request-id') ?? '', /^req_/);
      };
      await refused(await post(alice, vm('x1'), {}), 403);
      await refused(await post(alice, vm('x2'), { origin: 'https://evil.example' }), 403);
      await refused(await post(alice, vm('x3'), { origin: 'null' }), 403);
      await refused(await post(alice, vm('x3'), { origin: 'null', 'sec-fetch-site': 'cross-site' }), 403);
      await refused(await post(alice, vm('x3'), { 'sec-fetch-site': 'same-site' }), 403);
      await refused(await post(alice, vm('x4'), { referer: 'https://evil.example/page' }), 403);
      await refused(await post({ cookie: alice.cookie }, vm('x5')), 403);
      await refused(await post({ cookie: alice.cookie, csrf: bob.csrf }, vm('x6')), 403);
      await refused(await post(undefined, vm('x7')), 401);
      await refused(await post({ cookie: 'tenantry_console=forged', csrf: alice.csrf }, vm('x8')), 401);
      // What a browser sends under the console's no-referrer policy: Origin null, and Fetch Metadata.
      const fromBrowser = await post(alice, vm('x9'), { origin: 'null', 'sec-fetch-site': 'same-origin' });
      assert.equal(fromBrowser.status, 303);
      // Without Fetch Metadata, a same-origin Referer stands in for a missing Origin.
      assert.equal(
        (await post(alice, vm('x10', { vcpu: '129' }), { referer: `${server.partnerUrl}/console` })).status,
        400,
        'past the origin check',
      );
      assert.ok(!(await page(alice.cookie)).text.includes('>x1<'), 'nothing refused was created');
    });

    test('a VM is created: 303 to the console, which lists it; it blocks deletion, runs, and accrues usage at its size', async () => {
      const created = await post(alice, vm('web-1', { vcpu: '1', memory_gib: '3', storage_gib: '25' }));
      assert.equal(created.status, 303);
      assert.equal(created.headers.get('location'), '/console?project=default&created=web-1#vms');
      const listed = await page(alice.cookie, '?project=default&created=web-1');
      assert.match(listed.text, /VM <strong>web-1<\/strong> was created/);
      assert.match(
        listed.text,
        /<td><strong>web-1<\/strong><\/td><td>default<\/td><td>Ubuntu 24\.04 LTS<\/td><td class="num">1<\/td><td class="num">3 GiB<\/td><td class="num">25 GiB<\/td>/,
      );

      const conflict = assertError(await partnerApi(server, 'DELETE', '/customers/acme', { token: p.live }), 409, 'CONFLICT');
      assert.deepEqual((conflict.details as { vms: string[] }).vms, ['vms-acme-default/x9', 'vms-acme-default/web-1']);

      const day = server.clock.now().toISOString().slice(0, 10);
      const nextDay = new Date(server.clock.nowMs() + 2 * 86_400_000).toISOString().slice(0, 10);
      const usageBefore = await partnerApi<{ data: { vcpu_hours: number; memory_gib_hours: number; storage_gib_hours: number } }>(
        server,
        'GET',
        `/customers/acme/usage?from=${day}&to=${nextDay}`,
        { token: p.live },
      );
      server.clock.advance(3_600_000);
      const { refreshTokens } = await import('../../test/provisioning.ts');
      await refreshTokens(server, p);
      const usage = await partnerApi<{ data: { vcpu_hours: number; memory_gib_hours: number; storage_gib_hours: number } }>(
        server,
        'GET',
        `/customers/acme/usage?from=${day}&to=${nextDay}`,
        { token: p.live },
      );
      // One hour of x9 (1 vCPU, 2 GiB, 20 GiB) and web-1 (1 vCPU, 3 GiB, 25 GiB).
      const grew = (key: 'vcpu_hours' | 'memory_gib_hours' | 'storage_gib_hours') => usage.body.data[key] - usageBefore.body.data[key];
      assert.equal(Math.round(grew('vcpu_hours') * 1000) / 1000, 2);
      assert.equal(Math.round(grew('memory_gib_hours') * 1000) / 1000, 5);
      assert.equal(Math.round(grew('storage_gib_hours') * 1000) / 1000, 45);

      const suspended = await partnerApi<{ data: { workloads_running: number } }>(server, 'POST', '/customers/acme/suspend', {
        token: p.live,
        body: {},
      });
      assert.equal(suspended.body.data.workloads_running, 0, 'the VMs stop with the customer');
      // Suspension ends the customer's console sessions: no page, no form.
      assert.equal((await page(alice.cookie)).status, 401);
      assert.equal((await post(alice, vm('web-2'))).status, 401);
      const resumed = await partnerApi<{ data: { workloads_running: number } }>(server, 'POST', '/customers/acme/resume', {
        token: p.live,
        body: {},
      });
      assert.equal(resumed.body.data.workloads_running, 2, 'both VMs run again');
      alice = await signIn('acme', 'alice');
      assert.match((await page(alice.cookie)).text, /<td><strong>web-1<\/strong><\/td>[\s\S]*?running/);
    });

    test('the server refuses what the browser should have: sizes below the minimum, unknown OS, bad or taken names, over quota', async () => {
      const refusal = async (fields: Record<string, string>, status: number, message: RegExp) => {
        const response = await post(alice, fields);
        const html = await response.text();
        assert.equal(response.status, status, html.slice(0, 300));
        assert.match(html, message);
        return html;
      };
      const again = await refusal(
        vm('win', { os: 'Windows 11 Enterprise', vcpu: '2', memory_gib: '8', storage_gib: '64' }),
        400,
        /Windows 11 Enterprise needs at least 4 vCPU/,
      );
      assert.match(again, /name="name"[^>]*value="win"/, 'the form comes back with what was typed');
      assert.match(again, /data-selected-os="Windows 11 Enterprise"/);
      await refusal(vm('small', { storage_gib: '19' }), 400, /needs at least 20 GiB/);
      await refusal(vm('huge', { vcpu: '129' }), 400, /At most 128 vCPU/);
      await refusal(vm('frac', { vcpu: '1.5' }), 400, /Enter a whole number/);
      await refusal(vm('nope', { os: 'TempleOS' }), 400, /TempleOS is no longer offered/);
      await refusal(vm('Bad_Name'), 400, /lower-case letters/);
      await refusal(vm('web-1'), 400, /already has a VM named web-1/);
      await refusal(vm('elsewhere', { project: 'missing' }), 400, /Choose one of your projects/);
      // The standard plan holds 2 vCPU, 8 GiB and 50 GiB; x9 and web-1 hold 2 vCPU already.
      await refusal(vm('third'), 409, /The VM needs 1 vCPU; the customer&#39;s quota has 0 of 2 free/);
    });

    test("one customer's session reads and writes nothing of another customer's", async () => {
      const globexPage = await page(bob.cookie);
      assert.doesNotMatch(globexPage.text, /<strong>(web-1|x9)<\/strong>|acme/);
      assertError(
        await http(server.partnerUrl, 'GET', '/api/create-vm/vms-acme-default/os-images', { headers: { cookie: bob.cookie } }),
        404,
        'NOT_FOUND',
      );
      // Bob's form names projects of his own customer only: "default" is globex's.
      const created = await post(bob, vm('db-1'));
      assert.equal(created.status, 303);
      assert.match((await page(bob.cookie)).text, /<td><strong>db-1<\/strong><\/td><td>default<\/td>/);
      assert.doesNotMatch((await page(alice.cookie)).text, /<strong>db-1<\/strong>/);
      const conflict = assertError(await partnerApi(server, 'DELETE', '/customers/globex', { token: p.live }), 409, 'CONFLICT');
      assert.deepEqual((conflict.details as { vms: string[] }).vms, ['vms-globex-default/db-1']);
    });

    test('Platform.createVm is idempotent for the same VM and refuses another VM of the same name', async () => {
      const ctx = { partnerId: 'vms', mode: 'live' as const, now: server.clock.now() };
      const image = {
        osName: UBUNTU,
        url: 'https://x.example/u.img',
        cloudUser: 'ubuntu',
        firmware: 'bios' as const,
        machineType: 'q35',
        features: ['acpi'],
        cloudInit: null,
        bootOrder: ['disk'],
        additionalDisks: null,
      };
      const quota = { customer: { vcpu: 100, memory_gib: 100, storage_gib: 1000 }, project: {} };
      const org = { customerId: 'globex', organization: 'vms-globex' };
      const vm = { ...org, namespace: 'vms-globex-default', name: 'api-1', vcpu: 1, memoryGib: 1, storageGib: 10, image, quota };
      assert.deepEqual(await server.services.platform.createVm(ctx, vm), { state: 'done' });
      assert.deepEqual(await server.services.platform.createVm(ctx, vm), { state: 'done' }, 'asked again');
      const other = await server.services.platform.createVm(ctx, { ...vm, vcpu: 2 });
      assert.equal(other.state === 'refused' && other.code, 'ALREADY_EXISTS');
      const workloads = await server.services.platform.listWorkloads(ctx, org);
      assert.deepEqual(workloads.vms, ['vms-globex-default/db-1', 'vms-globex-default/api-1'], 'listed once');
    });

    test('a test-mode customer creates VMs on its own sandbox, apart from live', async () => {
      await activeCustomer(server, p.test, 'acme', { owner: { username: 'tess', email: 'tess@acme.example' } });
      const tess = await signIn('acme', 'tess', p.test);
      assert.doesNotMatch(
        (await page(tess.cookie)).text,
        /<strong>(web-1|x9)<\/strong>/,
        "the live customer's VMs are not the test customer's",
      );
      assert.equal((await post(tess, vm('web-1'))).status, 303, 'the same name is free in test mode');
      const conflict = assertError(await partnerApi(server, 'DELETE', '/customers/acme', { token: p.test }), 409, 'CONFLICT');
      assert.deepEqual((conflict.details as { vms: string[] }).vms, ['vms-acme-default/web-1']);

      // Once its VMs are gone the customer can be deleted, and the console forgets what it recorded.
      const cleared = await partnerApi(server, 'PUT', '/test-helpers/customers/acme/workloads', {
        token: p.test,
        body: { vms: [], databases: [], gpus: {} },
      });
      assert.equal(cleared.status, 200, cleared.text);
      assert.equal((await partnerApi(server, 'DELETE', '/customers/acme?mode=immediate', { token: p.test })).status, 202);
      await eventually(
        () => partnerApi(server, 'GET', '/customers/acme', { token: p.test }),
        (r) => r.status === 404,
      );
      const records = () => server.database.db.selectFrom('console_vms').select('name').where('created_by', '=', 'tess').execute();
      assert.equal((await records()).length, 1);
      await server.services.vms.deleteOrphanRecords();
      assert.deepEqual(await records(), []);
      assert.ok((await server.database.db.selectFrom('console_vms').select('name').execute()).length >= 3, 'live records stay');
    });
  });
}
