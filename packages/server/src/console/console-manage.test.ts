import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, http } from '../../test/client.ts';
import { consoleCookie, csrfFrom } from '../../test/console-session.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';

/**
 * What a signed-in person does beside creating a VM: signs out, stops, starts and deletes a VM, reads
 * the quota before the form refuses, and opens the form's address in the browser.
 */
for (const target of testDatabases()) {
  describe(`the console: sign-out, a VM's buttons, the quota [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    let alice: { cookie: string; csrf: string };

    const page = (cookie: string, query = '') => http(server.partnerUrl, 'GET', `/console${query}`, { headers: { cookie } });
    const signIn = async (customer: string, username: string) => {
      const { cookie } = await consoleCookie(server, p.live, customer, username);
      return { cookie, csrf: csrfFrom((await page(cookie)).text) };
    };
    const post = (path: string, session: { cookie: string; csrf?: string }, fields: Record<string, string> = {}) =>
      fetch(`${server.partnerUrl}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          origin: new URL(server.partnerUrl).origin,
          cookie: session.cookie,
        },
        body: new URLSearchParams({ ...(session.csrf ? { csrf: session.csrf } : {}), ...fields }),
      });
    const createVm = (name: string, sizes: { vcpu: string; memory_gib: string; storage_gib: string }) =>
      post('/console/vms', alice, { project: 'default', name, os: 'Ubuntu 24.04 LTS', ...sizes });
    const workloads = () =>
      server.services.platform.listWorkloads(
        { partnerId: 'manage', mode: 'live', now: server.clock.now() },
        { customerId: 'acme', organization: 'manage-acme' },
      );
    /** The quota card's rows: resource, used, quota, free. */
    const quotaRows = (html: string) =>
      [...(/<section class="card" id="quota">[\s\S]*?<\/section>/.exec(html)?.[0] ?? '').matchAll(/<tr><td>([^<]+)<\/td>(.*?)<\/tr>/g)].map(
        (row) => [row[1], ...[...(row[2] ?? '').matchAll(/<td[^>]*>(\d+)<\/td>/g)].map((cell) => Number(cell[1]))],
      );

    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'manage');
      await activeCustomer(server, p.live, 'acme', { owner: { username: 'alice', email: 'alice@acme.example' } });
      await activeCustomer(server, p.live, 'globex', {
        owner: { username: 'bob', email: 'bob@globex.example', first_name: 'Bob', last_name: 'Builder' },
      });
      alice = await signIn('acme', 'alice');
    });
    after(() => server.stop());

    test('the header names the person once: their name, else their username, beside their address and role', async () => {
      const who = (html: string) => /<span class="who">([\s\S]*?)<form/.exec(html)?.[1] ?? '';
      const plain = who((await page(alice.cookie)).text);
      assert.equal(plain.match(/alice(?!@)/g)?.length, 1, plain);
      assert.match(plain, /Signed in as <strong>alice<\/strong> <span class="muted">alice@acme\.example · admin<\/span>/);
      const bob = await signIn('globex', 'bob');
      const named = who((await page(bob.cookie)).text);
      assert.match(named, /Signed in as <strong>Bob Builder<\/strong> <span class="muted">bob · bob@globex\.example · admin<\/span>/);
    });

    test('the quota card shows what the plan allows, what the VMs hold and what is free, before the form refuses', async () => {
      // The standard plan: 2 vCPU, 8 GiB of memory, 50 GiB of storage.
      assert.deepEqual(quotaRows((await page(alice.cookie)).text), [
        ['vCPU', 0, 2, 2],
        ['Memory (GiB)', 0, 8, 8],
        ['Storage (GiB)', 0, 50, 50],
      ]);
      assert.equal((await createVm('web-1', { vcpu: '2', memory_gib: '2', storage_gib: '20' })).status, 303);
      const full = (await page(alice.cookie)).text;
      assert.deepEqual(quotaRows(full), [
        ['vCPU', 2, 2, 0],
        ['Memory (GiB)', 2, 8, 6],
        ['Storage (GiB)', 20, 50, 30],
      ]);
      assert.match(full, /<td class="num full">0<\/td>/, 'the resource with no room left stands out');
      assert.match(full, /Free in your quota for this project: 0 vCPU · 6 GiB memory · 30 GiB storage\./);
      // The script refuses a size past what is free before the form is sent; the server refuses it too.
      assert.match(full, /data-free="\{&quot;vcpu&quot;:0,&quot;memory_gib&quot;:6,&quot;storage_gib&quot;:30\}"/);
      const refused = await createVm('web-2', { vcpu: '1', memory_gib: '2', storage_gib: '20' });
      assert.equal(refused.status, 409);
      assert.match(await refused.text(), /the customer&#39;s quota has 0 of 2 free/);
    });

    test("a VM's buttons stop, start and delete it; each is announced; the platform does it; deletion frees the quota", async () => {
      const listed = (await page(alice.cookie)).text;
      assert.match(listed, /action="\/console\/vms\/default\/web-1\/stop"/);
      assert.match(listed, /action="\/console\/vms\/default\/web-1\/delete" data-confirm="Delete web-1 and its disk\?/);
      assert.doesNotMatch(listed, /web-1\/start/, 'a running VM offers Stop, not Start');

      const stopped = await post('/console/vms/default/web-1/stop', alice);
      assert.equal(stopped.status, 303);
      assert.equal(stopped.headers.get('location'), '/console?project=default&stopped=web-1#vms');
      assert.deepEqual((await workloads()).halted, ['manage-acme-default/web-1'], 'the platform halted it');
      const afterStop = (await page(alice.cookie, '?project=default&stopped=web-1')).text;
      assert.match(afterStop, /VM <strong>web-1<\/strong> was stopped\./);
      assert.match(afterStop, /<span class="badge bad">stopped<\/span>/);
      assert.match(afterStop, /action="\/console\/vms\/default\/web-1\/start"/);
      assert.deepEqual(quotaRows(afterStop)[0], ['vCPU', 2, 2, 0], 'a stopped VM keeps its place in the quota');

      const started = await post('/console/vms/default/web-1/start', alice);
      assert.equal(started.headers.get('location'), '/console?project=default&started=web-1#vms');
      assert.equal((await workloads()).halted, undefined, 'it runs again');
      assert.match((await page(alice.cookie, '?project=default&started=web-1')).text, /VM <strong>web-1<\/strong> was started\./);

      const deleted = await post('/console/vms/default/web-1/delete', alice);
      assert.equal(deleted.headers.get('location'), '/console?project=default&deleted=web-1#vms');
      assert.deepEqual((await workloads()).vms, [], 'the platform deleted it');
      const afterDelete = (await page(alice.cookie, '?project=default&deleted=web-1')).text;
      assert.match(afterDelete, /VM <strong>web-1<\/strong> was deleted with its disk\./);
      assert.doesNotMatch(afterDelete, /<td><strong>web-1<\/strong>/);
      assert.deepEqual(quotaRows(afterDelete)[0], ['vCPU', 0, 2, 2], 'its quota is free again');
      const records = await server.database.db.selectFrom('console_vms').select('name').where('name', '=', 'web-1').execute();
      assert.deepEqual(records, [], "the console's record goes with it");
    });

    test("a VM's buttons are refused without the form's token, and for a VM or project the customer does not have", async () => {
      assert.equal((await createVm('web-3', { vcpu: '1', memory_gib: '2', storage_gib: '20' })).status, 303);
      assert.equal((await post('/console/vms/default/web-3/delete', { cookie: alice.cookie })).status, 403, 'no token');
      const missing = await post('/console/vms/default/no-such-vm/stop', alice);
      assert.equal(missing.status, 404);
      assert.match(
        await missing.text(),
        /<p class="alert" role="alert">There is no VM no-such-vm in project default: it may have been deleted\.<\/p>/,
      );
      const elsewhere = await post('/console/vms/staging/web-3/stop', alice);
      assert.equal(elsewhere.status, 404);
      assert.match(await elsewhere.text(), /There is no VM web-3 in project staging\./);
      assert.equal((await workloads()).halted, undefined, 'nothing was stopped');
    });

    test('GET /console/vms: a browser gets the console, a script gets JSON, and nobody without a session gets either', async () => {
      const browser = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
      const opened = await fetch(`${server.partnerUrl}/console/vms`, { redirect: 'manual', headers: { ...browser, cookie: alice.cookie } });
      assert.equal(opened.status, 303);
      assert.equal(opened.headers.get('location'), '/console#vms');
      const signedOut = await fetch(`${server.partnerUrl}/console/vms`, { headers: browser });
      assert.equal(signedOut.status, 401);
      assert.match(signedOut.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(await signedOut.text(), /Not signed in/);

      const json = await http<{ status: string; data: Array<Record<string, unknown>> }>(server.partnerUrl, 'GET', '/console/vms', {
        headers: { cookie: alice.cookie },
      });
      assert.equal(json.status, 200);
      assert.match(json.headers.get('content-type') ?? '', /^application\/json/);
      assert.deepEqual(
        json.body.data.map((vm) => [vm.name, vm.project, vm.namespace, vm.vcpu, vm.running]),
        [['web-3', 'default', 'manage-acme-default', 1, true]],
      );
      assertError(await http(server.partnerUrl, 'GET', '/console/vms'), 401, 'UNAUTHORIZED');
    });

    test('sign-out ends the session server-side: the old cookie opens nothing, not even the cached OS list', async () => {
      const session = await signIn('acme', 'alice');
      const images = () =>
        http(server.partnerUrl, 'GET', '/api/create-vm/manage-acme-default/os-images', { headers: { cookie: session.cookie } });
      assert.equal((await images()).status, 200, 'the OS list remembers the session');
      assert.match((await page(session.cookie)).text, /<form class="sign-out" method="post" action="\/console\/logout">/);

      assert.equal((await post('/console/logout', { cookie: session.cookie })).status, 403, 'a sign-out needs the form token');
      assert.equal((await page(session.cookie)).status, 200, 'and without it the session goes on');

      const out = await post('/console/logout', session);
      assert.equal(out.status, 303);
      assert.equal(out.headers.get('location'), '/console/signed-out');
      assert.match(out.headers.get('set-cookie') ?? '', /^tenantry_console=; .*Expires=Thu, 01 Jan 1970/);
      const landing = await fetch(`${server.partnerUrl}/console/signed-out`);
      assert.equal(landing.status, 200);
      assert.match(await landing.text(), /You are signed out of the console/);

      assert.equal((await page(session.cookie)).status, 401, 'the old cookie is no session');
      assertError(await images(), 401, 'UNAUTHORIZED');
      assert.equal((await post('/console/vms/default/web-3/stop', session)).status, 401);
      assert.equal((await post('/console/logout', session)).status, 303, 'signing out again only clears the cookie');
      assert.equal((await page(alice.cookie)).status, 200, 'another session of the same person is not ended');
    });
  });
}
