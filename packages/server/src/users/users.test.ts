import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, http, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, createCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';

interface UserBody {
  username: string;
  email: string;
  role: string;
  is_owner: boolean;
  required_actions: string[];
}

for (const target of testDatabases()) {
  describe(`users and console login [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'people');
      await activeCustomer(server, p.live, 'acme', {
        display_name: 'Acme <Rockets>',
        owner: { username: 'alice', email: 'alice@acme.example', first_name: 'Alice' },
      });
      await activeCustomer(server, p.test, 'acme', { owner: { username: 'alice', email: 'alice@acme.example' } });
    });
    after(() => server.stop());

    const addUser = (body: Record<string, unknown>, token = p.live) =>
      partnerApi<{ data: UserBody }>(server, 'POST', '/customers/acme/users', { token, body });

    test('create answers 201 with the user; the list is by username with the owner included', async () => {
      const created = await addUser({ username: 'bob', email: 'bob@acme.example', role: 'admin', last_name: 'Builder' });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.body.data.role, 'admin');
      assert.equal(created.body.data.is_owner, false);
      assert.deepEqual(created.body.data.required_actions, []);
      assert.equal((await addUser({ username: 'aaron', email: 'aaron@acme.example' })).body.data.role, 'member', 'member by default');
      const list = await partnerApi<{ data: UserBody[] }>(server, 'GET', '/customers/acme/users', { token: p.live });
      assert.deepEqual(
        list.body.data.map((u) => [u.username, u.is_owner]),
        [
          ['aaron', false],
          ['alice', true],
          ['bob', false],
        ],
      );
    });

    test('ALREADY_EXISTS for a taken username or email (any case); 400 for bad fields', async () => {
      const username = assertError(await addUser({ username: 'bob', email: 'other@acme.example' }), 409, 'ALREADY_EXISTS');
      assert.equal(username.details?.field, 'username');
      const email = assertError(await addUser({ username: 'robert', email: 'BOB@acme.example' }), 409, 'ALREADY_EXISTS');
      assert.equal(email.details?.field, 'email');
      assertError(await addUser({ username: 'x', email: 'x@acme.example', role: 'root' }), 400, 'VALIDATION_ERROR');
      // Test mode is its own identity provider: the live user's email is free there.
      assert.equal((await addUser({ username: 'bob', email: 'bob@acme.example' }, p.test)).status, 201);
    });

    test('reserved usernames (admin, service-account-*) answer 400 at once, for users and owners, on the sandbox too', async () => {
      for (const username of ['admin', 'service-account-tenantry']) {
        const refused = assertError(await addUser({ username, email: `${username}@acme.example` }), 400, 'VALIDATION_ERROR');
        const fields = (refused.details?.errors ?? []) as { field: string }[];
        assert.deepEqual(
          fields.map((e) => e.field),
          ['username'],
        );
        assert.match(JSON.stringify(refused.details), /reserved/);
      }
      const owner = assertError(
        await partnerApi(server, 'POST', '/customers', {
          token: p.live,
          body: { id: 'reserved-owner', owner: { username: 'admin', email: 'admin@reserved.example' } },
        }),
        400,
        'VALIDATION_ERROR',
      );
      const ownerFields = (owner.details?.errors ?? []) as { field: string }[];
      assert.equal(ownerFields[0]?.field, 'owner.username');
      assertError(await partnerApi(server, 'GET', '/customers/reserved-owner', { token: p.live }), 404, 'NOT_FOUND');
    });

    test('deleting the owner answers 403 FORBIDDEN; another user is deleted', async () => {
      const owner = assertError(await partnerApi(server, 'DELETE', '/customers/acme/users/alice', { token: p.live }), 403, 'FORBIDDEN');
      assert.equal(owner.details?.is_owner, true);
      const deleted = await partnerApi<{ data: unknown }>(server, 'DELETE', '/customers/acme/users/aaron', { token: p.live });
      assert.equal(deleted.status, 200, deleted.text);
      assert.deepEqual(deleted.body.data, { username: 'aaron', deleted: true });
      assertError(await partnerApi(server, 'GET', '/customers/acme/users/aaron', { token: p.live }), 404, 'NOT_FOUND');
      assertError(await partnerApi(server, 'DELETE', '/customers/acme/users/aaron', { token: p.live }), 404, 'NOT_FOUND');
    });

    test('at most the first 1,000 users by username are listable', async () => {
      await activeCustomer(server, p.live, 'crowd', { owner: { username: 'zz-owner', email: 'owner@crowd.example' } });
      const customer = await server.database.db
        .selectFrom('customers')
        .select(['uid', 'platform_scope'])
        .where('id', '=', 'crowd')
        .executeTakeFirstOrThrow();
      // 1,000 more users, written as the users API would (1,001 in all).
      const rows = Array.from({ length: 1000 }, (_, i) => ({
        customer_uid: customer.uid,
        platform_scope: customer.platform_scope,
        partner_id: 'people',
        mode: 'live' as const,
        customer_id: 'crowd',
        uid: `usr_crowd${i}`,
        username: `u${String(i).padStart(4, '0')}`,
        email: `u${i}@crowd.example`,
        email_key: `u${i}@crowd.example`,
        role: 'member' as const,
        is_owner: false,
        first_name: null,
        last_name: null,
        required_actions: [],
        created_at: new Date(),
      }));
      await server.database.db.insertInto('users').values(rows).execute();
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const query: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
        const page = await partnerApi<{ data: UserBody[]; pagination: { next_cursor: string | null } }>(
          server,
          'GET',
          `/customers/crowd/users?limit=200${query}`,
          { token: p.live },
        );
        assert.equal(page.status, 200, page.text);
        seen.push(...page.body.data.map((u) => u.username));
        cursor = page.body.pagination.next_cursor;
      } while (cursor);
      assert.equal(seen.length, 1000);
      assert.equal(seen.at(-1), 'u0999');
      assert.ok(!seen.includes('zz-owner'), 'the 1,001st username is past the listable range');
    });

    test('console login: a one-time URL valid 5 minutes that lands on /console naming the user, customer and projects', async () => {
      const minted = await partnerApi<{ data: { url: string; expires_at: string } }>(
        server,
        'POST',
        '/customers/acme/users/alice/console-login',
        { token: p.live },
      );
      assert.equal(minted.status, 201, minted.text);
      assert.equal(minted.body.data.expires_at, new Date(server.clock.nowMs() + 5 * 60_000).toISOString());
      const url = new URL(minted.body.data.url);
      assert.equal(url.origin, new URL(server.partnerUrl).origin, 'built on the public URL');
      const opened = await fetch(url, { redirect: 'manual' });
      assert.equal(opened.status, 303);
      assert.equal(opened.headers.get('location'), '/console');
      const cookie = opened.headers.get('set-cookie') ?? '';
      assert.match(cookie, /HttpOnly/);
      const page = await http(server.partnerUrl, 'GET', '/console', { headers: { cookie: cookie.split(';')[0] ?? '' } });
      assert.equal(page.status, 200);
      assert.match(page.text, /Acme &lt;Rockets&gt;/, 'customer named, HTML escaped');
      assert.match(page.text, /alice@acme\.example/);
      assert.match(page.text, /acme-default/);
      assert.equal((await fetch(url, { redirect: 'manual' })).status, 401, 'the link works once');
      assert.equal((await http(server.partnerUrl, 'GET', '/console')).status, 401, 'no session, no console');

      const late = await partnerApi<{ data: { url: string } }>(server, 'POST', '/customers/acme/users/bob/console-login', {
        token: p.live,
      });
      server.clock.advance(5 * 60_000 + 1);
      assert.equal((await fetch(late.body.data.url, { redirect: 'manual' })).status, 401, 'expired after 5 minutes');
    });

    test('console login answers 409 USER_ACTION_REQUIRED naming the pending action, 404 for an unknown user', async () => {
      const fresh = await partnerWithModes(server, 'people-2');
      await activeCustomer(server, fresh.test, 'idp', { owner: { username: 'carol', email: 'carol@idp.example' } });
      const set = await partnerApi(server, 'PUT', '/test-helpers/customers/idp/users/carol/required-actions', {
        token: fresh.test,
        body: { actions: ['VERIFY_EMAIL'] },
      });
      assert.equal(set.status, 200, set.text);
      const user = await partnerApi<{ data: UserBody }>(server, 'GET', '/customers/idp/users/carol', { token: fresh.test });
      assert.deepEqual(user.body.data.required_actions, ['VERIFY_EMAIL']);
      const error = assertError(
        await partnerApi(server, 'POST', '/customers/idp/users/carol/console-login', { token: fresh.test }),
        409,
        'USER_ACTION_REQUIRED',
      );
      assert.match(error.message, /VERIFY_EMAIL/);
      await partnerApi(server, 'PUT', '/test-helpers/customers/idp/users/carol/required-actions', {
        token: fresh.test,
        body: { actions: [] },
      });
      assert.equal((await partnerApi(server, 'POST', '/customers/idp/users/carol/console-login', { token: fresh.test })).status, 201);
      assertError(await partnerApi(server, 'POST', '/customers/idp/users/nobody/console-login', { token: fresh.test }), 404, 'NOT_FOUND');
      await createCustomer(server, fresh.live, 'later');
    });
  });
}
