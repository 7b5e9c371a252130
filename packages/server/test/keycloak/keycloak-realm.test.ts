import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import KcAdminClient from '@keycloak/keycloak-admin-client';
import { refusal } from './admin-client.ts';
import { KeycloakDouble } from './index.ts';

/**
 * The Keycloak double through Keycloak's official admin client: realms, groups and memberships,
 * clients, the realm Kube-DC's Organization controller sets up, the password grant and who may call
 * which realm's admin API.
 */

function claims(token: string | undefined): Record<string, unknown> {
  return JSON.parse(Buffer.from(token?.split('.')[1] ?? '', 'base64url').toString('utf8'));
}

describe('Keycloak double: realms, groups, clients, organization realms and logins', () => {
  let keycloak: KeycloakDouble;
  let kc: KcAdminClient;

  before(async () => {
    keycloak = await KeycloakDouble.start();
    kc = new KcAdminClient({ baseUrl: keycloak.url, realmName: 'master' });
    const { clientId, clientSecret } = keycloak.credentials;
    await kc.auth({ grantType: 'client_credentials', clientId, clientSecret });
  });
  after(() => keycloak.close());

  test('realms: create (409 when the name is taken), read the settings, update only what is sent, delete', async () => {
    const { realmName } = await kc.realms.create({ realm: 'acme', enabled: true, displayName: 'Acme', accessTokenLifespan: 300 });
    assert.equal(realmName, 'acme');
    assert.deepEqual(await refusal(kc.realms.create({ realm: 'acme', enabled: true })), {
      status: 409,
      body: { errorMessage: 'Conflict detected. See logs for details' },
    });
    await kc.realms.update({ realm: 'acme' }, { defaultLocale: 'en' });
    const acme = await kc.realms.findOne({ realm: 'acme' });
    assert.deepEqual([acme?.displayName, acme?.enabled, acme?.accessTokenLifespan, acme?.defaultLocale], ['Acme', true, 300, 'en']);
    assert.equal(acme?.duplicateEmailsAllowed, false);
    await kc.realms.del({ realm: 'acme' });
    assert.equal(await kc.realms.findOne({ realm: 'acme' }), null);
  });

  test('groups: create (409 for a second top-level group of that name), search, memberships both ways', async () => {
    await kc.realms.create({ realm: 'groups', enabled: true });
    kc.setConfig({ realmName: 'groups' });
    const { id: admins } = await kc.groups.create({ name: 'org-admin' });
    const { id: members } = await kc.groups.create({ name: 'user' });
    assert.deepEqual(await refusal(kc.groups.create({ name: 'org-admin' })), {
      status: 409,
      body: { errorMessage: "Top level group named 'org-admin' already exists." },
    });
    assert.deepEqual(await refusal(kc.groups.create({ name: ' ' })), { status: 400, body: { errorMessage: 'Group name is missing' } });
    const found = await kc.groups.find({ search: 'ADMIN' });
    assert.deepEqual(
      found.map((g) => [g.name, g.path]),
      [['org-admin', '/org-admin']],
    );
    assert.deepEqual(
      (await kc.groups.find({ search: 'admin', exact: true })).map((g) => g.name),
      [],
      'exact compares the whole name',
    );

    const { id: ada } = await kc.users.create({ username: 'ada', enabled: true, groups: ['/user'] });
    await kc.users.addToGroup({ id: ada, groupId: admins });
    await kc.users.addToGroup({ id: ada, groupId: admins });
    assert.deepEqual(
      (await kc.users.listGroups({ id: ada })).map((g) => g.path),
      ['/org-admin', '/user'],
    );
    assert.deepEqual(
      (await kc.groups.listMembers({ id: admins })).map((u) => u.username),
      ['ada'],
    );
    await kc.users.delFromGroup({ id: ada, groupId: members });
    assert.deepEqual(
      (await kc.users.listGroups({ id: ada })).map((g) => g.name),
      ['org-admin'],
    );
    assert.deepEqual(await refusal(kc.users.addToGroup({ id: ada, groupId: 'no-such-group' })), {
      status: 404,
      body: { error: 'Group not found' },
    });

    const unknownPath = await refusal(kc.users.create({ username: 'bob', enabled: true, groups: ['/no-such-group'] }));
    assert.equal(unknownPath.status, 500, 'a group path that names no group fails the creation');
    assert.deepEqual(await kc.users.find({ username: 'bob', exact: true }), [], 'and nothing is left behind');
    kc.setConfig({ realmName: 'master' });
  });

  test('clients: find by clientId, create (409 when the clientId is taken)', async () => {
    await kc.realms.create({ realm: 'clients', enabled: true });
    kc.setConfig({ realmName: 'clients' });
    assert.deepEqual(
      (await kc.clients.find({ clientId: 'admin-cli' })).map((c) => [c.clientId, c.publicClient, c.directAccessGrantsEnabled]),
      [['admin-cli', true, true]],
      'every realm has the built-in clients',
    );
    const { id } = await kc.clients.create({ clientId: 'portal', publicClient: true, directAccessGrantsEnabled: true });
    assert.equal((await kc.clients.findOne({ id }))?.clientId, 'portal');
    assert.deepEqual(await refusal(kc.clients.create({ clientId: 'portal' })), {
      status: 409,
      body: { errorMessage: 'Client portal already exists' },
    });
    assert.deepEqual(await kc.clients.find({ clientId: 'port' }), [], 'clientId is matched exactly unless search=true');
    kc.setConfig({ realmName: 'master' });
  });

  test('an organization realm as Kube-DC sets it up: settings, the kube-dc client, groups, and admin with the email', async () => {
    const access = keycloak.provisionOrganizationRealm('globex', { email: 'Owner@Globex.example' });
    assert.equal(access.user, 'admin');
    assert.equal(new URL(access.url).origin, keycloak.url, 'the url names this Keycloak');
    kc.setConfig({ realmName: 'globex' });
    const realm = await kc.realms.findOne({ realm: 'globex' });
    assert.deepEqual([realm?.displayName, realm?.enabled, realm?.accessTokenLifespan, realm?.defaultLocale], ['globex', true, 300, 'en']);
    const kubeDc = await kc.clients.find({ clientId: 'kube-dc' });
    assert.deepEqual(
      kubeDc.map((c) => [c.enabled, c.publicClient, c.directAccessGrantsEnabled]),
      [[true, true, true]],
    );
    assert.deepEqual((await kc.groups.find()).map((g) => g.name).sort(), ['org-admin', 'user']);
    const [admin] = await kc.users.find({ username: 'admin', exact: true });
    assert.equal(admin?.email, 'owner@globex.example');
    assert.equal(admin?.enabled, true);
    assert.deepEqual(
      (await kc.users.listGroups({ id: admin?.id ?? '' })).map((g) => g.name),
      ['org-admin'],
    );

    assert.deepEqual(await refusal(kc.users.create({ username: 'owner', email: 'owner@globex.example', enabled: true })), {
      status: 409,
      body: { errorMessage: 'User exists with same email' },
    });
    assert.deepEqual(await refusal(kc.users.create({ username: 'admin', enabled: true })), {
      status: 409,
      body: { errorMessage: 'User exists with same username' },
    });
    assert.equal(
      keycloak.provisionOrganizationRealm('globex', { email: 'owner@globex.example' }).password,
      access.password,
      'a reconcile keeps the admin',
    );

    assert.equal(keycloak.deleteOrganizationRealm('globex'), true);
    assert.equal(await kc.realms.findOne({ realm: 'globex' }), null);
    kc.setConfig({ realmName: 'master' });
  });

  test('the password grant: admin logs in with the realm-access password and administers its own realm only', async () => {
    const access = keycloak.provisionOrganizationRealm('initech', { email: 'owner@initech.example' });
    await kc.realms.create({ realm: 'other', enabled: true });
    const org = new KcAdminClient({ baseUrl: keycloak.url, realmName: 'initech' });
    await org.auth({ grantType: 'password', clientId: 'kube-dc', username: access.user, password: access.password });
    const token = claims(org.accessToken);
    assert.equal(token.preferred_username, 'admin');
    assert.equal(token.email, 'owner@initech.example');
    assert.deepEqual(token.groups, ['org-admin']);
    assert.equal(token.org, 'initech');
    assert.equal(token.exp, (token.iat as number) + 300, "the realm's access token lifespan");

    assert.deepEqual(
      (await org.users.find()).map((u) => u.username),
      ['admin'],
    );
    const { id: bob } = await org.users.create({
      username: 'bob',
      enabled: true,
      credentials: [{ type: 'password', value: 'bob-password' }],
    });
    assert.ok(bob, 'the organization admin manages its users');
    assert.equal((await refusal(org.realms.findOne({ realm: 'other' }))).status, 403, 'another realm is out of reach');
    assert.equal((await refusal(org.realms.create({ realm: 'mine', enabled: true }))).status, 403, 'creating realms too');

    const member = new KcAdminClient({ baseUrl: keycloak.url, realmName: 'initech' });
    await member.auth({ grantType: 'password', clientId: 'kube-dc', username: 'bob', password: 'bob-password' });
    assert.equal((await refusal(member.users.find())).status, 403, 'a user without realm-management roles may not use the admin API');

    const wrong = new KcAdminClient({ baseUrl: keycloak.url, realmName: 'initech' });
    assert.deepEqual(await refusal(wrong.auth({ grantType: 'password', clientId: 'kube-dc', username: 'admin', password: 'nope' })), {
      status: 401,
      body: { error: 'invalid_grant', error_description: 'Invalid user credentials' },
    });
    assert.deepEqual(
      await refusal(wrong.auth({ grantType: 'password', clientId: 'no-such-client', username: 'admin', password: access.password })),
      {
        status: 401,
        body: { error: 'unauthorized_client', error_description: 'Invalid client or Invalid client credentials' },
      },
    );
    await org.users.update({ id: bob }, { requiredActions: ['UPDATE_PASSWORD'] });
    assert.deepEqual(await refusal(wrong.auth({ grantType: 'password', clientId: 'kube-dc', username: 'bob', password: 'bob-password' })), {
      status: 400,
      body: { error: 'invalid_grant', error_description: 'Account is not fully set up' },
    });
    const cli = new KcAdminClient({ baseUrl: keycloak.url, realmName: 'initech' });
    await cli.auth({ grantType: 'password', clientId: 'admin-cli', username: 'admin', password: access.password });
    assert.ok(await cli.realms.findOne({ realm: 'initech' }), "admin-cli logs in too, as Kube-DC's e2e test does");
  });

  test('admin tokens: a revoked token is 401; the admin realm client refuses a wrong secret', async () => {
    const client = new KcAdminClient({ baseUrl: keycloak.url, realmName: 'master' });
    assert.deepEqual(
      await refusal(client.auth({ grantType: 'client_credentials', clientId: keycloak.credentials.clientId, clientSecret: 'wrong' })),
      {
        status: 401,
        body: { error: 'unauthorized_client', error_description: 'Invalid client or Invalid client credentials' },
      },
    );
    const { clientId, clientSecret } = keycloak.credentials;
    await client.auth({ grantType: 'client_credentials', clientId, clientSecret });
    keycloak.revokeTokens();
    assert.equal((await refusal(client.realms.find())).status, 401);
    await kc.auth({ grantType: 'client_credentials', clientId, clientSecret });
  });
});
