import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, http, operatorApi, partnerApi } from '../../test/client.ts';
import { consoleCookie } from '../../test/console-session.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';

/**
 * The Partner fields Kube-DC defines and the operator may set here too: the partner's portal (which the
 * console links to, as Kube-DC's console does), its contact address, and the first project a customer
 * gets when its create names none.
 */
for (const target of testDatabases()) {
  describe(`a partner's portal, contact and default project [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'portal', {
        portal_url: 'https://portal.example.com/',
        contact_email: 'ops@portal.example.com',
        defaults: { project: 'main' },
      });
    });
    after(() => server.stop());

    test('the operator sets them, reads them back, and refuses a portal that is not https or an address that is not one', async () => {
      const read = await operatorApi<{ data: Record<string, unknown> }>(server, 'GET', '/partners/portal');
      assert.deepEqual(
        [read.body.data.portal_url, read.body.data.contact_email, (read.body.data.defaults as Record<string, unknown>).project],
        ['https://portal.example.com/', 'ops@portal.example.com', 'main'],
      );
      for (const body of [
        { portal_url: 'http://portal.example.com/' },
        { portal_url: 'https://user@portal.example.com/' },
        { contact_email: 'nobody' },
      ])
        assertError(await operatorApi(server, 'PATCH', '/partners/portal', { body }), 400, 'VALIDATION_ERROR');
      const whoami = await partnerApi<{ data: { defaults: { project: string } } }>(server, 'GET', '/auth/whoami', { token: p.live });
      assert.equal(whoami.body.data.defaults.project, 'main');
    });

    test("a customer created without a project gets the partner's default one", async () => {
      await activeCustomer(server, p.live, 'globex');
      const customer = await partnerApi<{ data: { projects: { name: string; namespace: string }[] } }>(server, 'GET', '/customers/globex', {
        token: p.live,
      });
      assert.deepEqual(
        customer.body.data.projects.map((project) => project.name),
        ['main'],
      );
    });

    test('the console links to the partner\'s portal, "Manage in <name> portal", and not once the operator removes it', async () => {
      const { cookie } = await consoleCookie(server, p.live, 'globex', 'owner');
      const page = await http(server.partnerUrl, 'GET', '/console', { headers: { cookie } });
      assert.match(
        page.text,
        /<a class="portal" href="https:\/\/portal\.example\.com\/" rel="noopener noreferrer">Manage in Partner portal portal<\/a>/,
      );
      assert.equal((await operatorApi(server, 'PATCH', '/partners/portal', { body: { portal_url: null } })).status, 200);
      // The console reads the partner through its cache (at most 2 s old): let it expire.
      server.clock.advance(3_000);
      const without = await http(server.partnerUrl, 'GET', '/console', { headers: { cookie } });
      assert.doesNotMatch(without.text, /class="portal"/);
    });
  });
}
