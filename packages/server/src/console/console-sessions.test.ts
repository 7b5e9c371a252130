import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { http, operatorApi, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';

/**
 * Console links and sessions belong to a person (issue 13, section 3): removing the user, suspending
 * the customer or the partner, or scheduling the customer's deletion, ends them for good, and a
 * namesake is someone else. Only the GET of a link uses it up, not a link preview's HEAD.
 */
for (const target of testDatabases()) {
  describe(`console sessions belong to people [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'consoles');
      await activeCustomer(server, p.live, 'globex', { owner: { username: 'owner', email: 'owner@globex.example' } });
      await activeCustomer(server, p.live, 'initech', { owner: { username: 'owner', email: 'owner@initech.example' } });
    });
    after(() => server.stop());

    const addUser = (customer: string, username: string, email: string) =>
      partnerApi(server, 'POST', `/customers/${customer}/users`, { token: p.live, body: { username, email } });
    const removeUser = (customer: string, username: string) =>
      partnerApi(server, 'DELETE', `/customers/${customer}/users/${username}`, { token: p.live });
    const mintLink = async (customer: string, username: string) => {
      const minted = await partnerApi<{ data: { url: string } }>(server, 'POST', `/customers/${customer}/users/${username}/console-login`, {
        token: p.live,
      });
      assert.equal(minted.status, 201, minted.text);
      return new URL(minted.body.data.url).pathname;
    };
    /** Opens a link; the session cookie, or undefined when the link did not log anyone in. */
    const open = async (path: string) => {
      const opened = await fetch(`${server.partnerUrl}${path}`, { redirect: 'manual' });
      await opened.arrayBuffer();
      const cookie = opened.headers.get('set-cookie');
      return opened.status === 303 && cookie ? (cookie.split(';')[0] as string) : undefined;
    };
    const consolePage = (cookie: string) => http(server.partnerUrl, 'GET', '/console', { headers: { cookie } });

    test('deleting a user ends their session and unused links; a new user of the same name is someone else', async () => {
      assert.equal((await addUser('globex', 'eve', 'eve@globex.example')).status, 201);
      const session = await open(await mintLink('globex', 'eve'));
      assert.ok(session, 'the link logs eve in');
      const unused = await mintLink('globex', 'eve');
      assert.equal((await consolePage(session)).status, 200);

      assert.equal((await removeUser('globex', 'eve')).status, 200);
      assert.equal((await addUser('globex', 'eve', 'eve.new@globex.example')).status, 201, 'another person takes the name');

      assert.equal((await consolePage(session)).status, 401, "the old eve's session does not reach the new eve's console");
      assert.equal(await open(unused), undefined, "the old eve's unused link logs nobody in");
      const fresh = await open(await mintLink('globex', 'eve'));
      assert.ok(fresh);
      const page = await consolePage(fresh);
      assert.equal(page.status, 200);
      assert.match(page.text, /eve\.new@globex\.example/);
    });

    test('suspending the customer ends its sessions for good; resuming does not bring them back', async () => {
      const session = await open(await mintLink('globex', 'owner'));
      assert.ok(session);
      const unused = await mintLink('globex', 'owner');
      const other = await open(await mintLink('initech', 'owner'));
      assert.ok(other);
      assert.equal((await partnerApi(server, 'POST', '/customers/globex/suspend', { token: p.live, body: {} })).status, 200);
      assert.equal((await consolePage(session)).status, 401);
      assert.equal((await partnerApi(server, 'POST', '/customers/globex/resume', { token: p.live, body: {} })).status, 200);
      assert.equal((await consolePage(session)).status, 401, 'ended, not paused');
      assert.equal(await open(unused), undefined, 'links minted before the suspension are void');
      assert.equal((await consolePage(other)).status, 200, "another customer's session is untouched");
      assert.ok(await open(await mintLink('globex', 'owner')), 'a new link works after the resume');
    });

    test('a scheduled deletion ends sessions and unused links for good; cancelling it does not bring them back', async () => {
      const session = await open(await mintLink('globex', 'owner'));
      assert.ok(session);
      const unused = await mintLink('globex', 'owner');
      const scheduled = await partnerApi(server, 'DELETE', '/customers/globex?mode=scheduled', { token: p.live });
      assert.equal(scheduled.status, 202, scheduled.text);
      assert.equal((await consolePage(session)).status, 401);
      const resumed = await partnerApi<{ data: { cancelled_scheduled_deletion: boolean } }>(server, 'POST', '/customers/globex/resume', {
        token: p.live,
        body: {},
      });
      assert.equal(resumed.status, 200, resumed.text);
      assert.equal(resumed.body.data.cancelled_scheduled_deletion, true);
      assert.equal((await consolePage(session)).status, 401, 'ended, not paused');
      assert.equal(await open(unused), undefined, 'links minted before the deletion was scheduled are void');
      const fresh = await open(await mintLink('globex', 'owner'));
      assert.ok(fresh, 'a new link works after the resume');
      assert.equal((await consolePage(fresh)).status, 200);
    });

    test('a HEAD of a login link (a link preview) neither logs in nor uses it up; the GET after it logs in, once', async () => {
      const link = await mintLink('initech', 'owner');
      for (const round of [1, 2]) {
        const head = await fetch(`${server.partnerUrl}${link}`, { method: 'HEAD', redirect: 'manual' });
        await head.arrayBuffer();
        assert.equal(head.headers.get('set-cookie'), null, `HEAD ${round} opens no session`);
        assert.equal(head.status, 200, `HEAD ${round}`);
        assert.equal(head.headers.get('cache-control'), 'no-store');
        assert.equal(head.headers.get('referrer-policy'), 'no-referrer');
      }
      const session = await open(link);
      assert.ok(session, 'the GET after the HEADs logs in');
      assert.equal((await consolePage(session)).status, 200);
      assert.equal(await open(link), undefined, 'the GET used the link up');
    });

    test("suspending the partner ends every session of its customers' users", async () => {
      const session = await open(await mintLink('initech', 'owner'));
      assert.ok(session);
      assert.equal((await operatorApi(server, 'POST', '/partners/consoles/suspend')).status, 200);
      assert.equal((await consolePage(session)).status, 401);
      assert.equal((await operatorApi(server, 'POST', '/partners/consoles/unsuspend')).status, 200);
      assert.equal((await consolePage(session)).status, 401, 'ended, not paused');
    });

    test('console pages forbid framing, inline script and style, and referrers', async () => {
      const session = await open(await mintLink('initech', 'owner'));
      assert.ok(session);
      for (const response of [await consolePage(session), await http(server.partnerUrl, 'GET', '/console')]) {
        const csp = response.headers.get('content-security-policy') ?? '';
        assert.match(csp, /frame-ancestors 'none'/);
        assert.match(csp, /script-src 'self'/);
        assert.doesNotMatch(csp, /unsafe-inline/);
        assert.equal(response.headers.get('x-frame-options'), 'DENY');
        assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
        assert.doesNotMatch(response.text, /<style|<script>|style="/, 'nothing inline that the policy would block');
      }
      const css = await fetch(`${server.partnerUrl}/console/assets/console.css`);
      assert.equal(css.status, 200);
      assert.match(css.headers.get('content-type') ?? '', /text\/css/);
    });
  });
}
