import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import KcAdminClient from '@keycloak/keycloak-admin-client';
import { UnmanagedAttributePolicy } from '@keycloak/keycloak-admin-client/lib/defs/userProfileMetadata.js';
import { refusal } from './admin-client.ts';
import { KeycloakDouble } from './index.ts';

/**
 * The Keycloak double through Keycloak's official admin client (@keycloak/keycloak-admin-client 26):
 * the client decides the request shapes, the double answers as Keycloak 26 does. Users and the user
 * profile here; groups, Kube-DC's organization realm and logins in keycloak-realm.test.ts.
 */

describe('Keycloak double: users and the declarative user profile', () => {
  let keycloak: KeycloakDouble;
  let kc: KcAdminClient;
  let realm = 0;

  before(async () => {
    keycloak = await KeycloakDouble.start();
    kc = new KcAdminClient({ baseUrl: keycloak.url, realmName: 'master' });
    const { clientId, clientSecret } = keycloak.credentials;
    await kc.auth({ grantType: 'client_credentials', clientId, clientSecret });
  });
  after(() => keycloak.close());

  /** A fresh realm per test, so that users and profile changes do not leak between tests. */
  async function freshRealm(): Promise<string> {
    realm += 1;
    const { realmName } = await kc.realms.create({ realm: `r${realm}`, enabled: true });
    kc.setConfig({ realmName });
    return realmName;
  }

  test('an attribute the realm does not declare is dropped without a word; declaring it keeps it', async () => {
    await freshRealm();
    const { id } = await kc.users.create({ username: 'ada', enabled: true, attributes: { department: ['sales'] } });
    assert.equal((await kc.users.findOne({ id }))?.attributes, undefined, 'created (201), but the attribute is gone');

    const profile = await kc.users.getProfile();
    assert.deepEqual(
      profile.attributes?.map((a) => a.name),
      ['username', 'email', 'firstName', 'lastName'],
      'a new realm declares what Keycloak ships',
    );
    assert.equal(profile.unmanagedAttributePolicy, undefined, 'unmanaged attributes are off');
    await kc.users.updateProfile({
      ...profile,
      attributes: [
        ...(profile.attributes ?? []),
        { name: 'department', permissions: { view: ['admin'], edit: ['admin'] }, multivalued: false },
      ],
    });
    const { id: second } = await kc.users.create({ username: 'bob', enabled: true, attributes: { department: ['sales'] } });
    assert.deepEqual((await kc.users.findOne({ id: second }))?.attributes, { department: ['sales'] });
  });

  test('unmanagedAttributePolicy: ENABLED keeps undeclared attributes, ADMIN_VIEW shows them but ignores writes, none hides them', async () => {
    await freshRealm();
    const profile = await kc.users.getProfile();
    await kc.users.updateProfile({ ...profile, unmanagedAttributePolicy: UnmanagedAttributePolicy.Enabled });
    const { id } = await kc.users.create({ username: 'ada', enabled: true, attributes: { 'tenantry.io/managed-by': ['tenantry'] } });
    assert.deepEqual((await kc.users.findOne({ id }))?.attributes, { 'tenantry.io/managed-by': ['tenantry'] });

    await kc.users.updateProfile({ ...profile, unmanagedAttributePolicy: UnmanagedAttributePolicy.AdminView });
    await kc.users.update({ id }, { attributes: { 'tenantry.io/managed-by': ['someone-else'] } });
    assert.deepEqual((await kc.users.findOne({ id }))?.attributes, { 'tenantry.io/managed-by': ['tenantry'] }, 'the write is ignored');

    await kc.users.updateProfile({ ...profile });
    assert.equal((await kc.users.findOne({ id }))?.attributes, undefined, 'with the policy off the stored attribute is not shown');
  });

  test('an attribute named like tenantry.io/managed-by cannot be declared: the name may only hold letters, digits, . _ -', async () => {
    await freshRealm();
    const profile = await kc.users.getProfile();
    const refused = await refusal(
      kc.users.updateProfile({ ...profile, attributes: [...(profile.attributes ?? []), { name: 'tenantry.io/managed-by' }] }),
    );
    assert.equal(refused.status, 400);
    assert.match(String((refused.body as { errorMessage: string }).errorMessage), /Invalid attribute name/);
    const noUsername = await refusal(
      kc.users.updateProfile({ ...profile, attributes: profile.attributes?.filter((a) => a.name !== 'username') }),
    );
    assert.deepEqual(noUsername, { status: 400, body: { errorMessage: "[The attribute 'username' can not be removed]" } });
  });

  test('PUT with attributes replaces them: first name, last name and email left out are cleared, the username stays', async () => {
    await freshRealm();
    const profile = await kc.users.getProfile();
    await kc.users.updateProfile({
      ...profile,
      attributes: [...(profile.attributes ?? []), { name: 'department', permissions: { view: ['admin'], edit: ['admin'] } }],
    });
    const full = { username: 'ada', email: 'ada@acme.example', firstName: 'Ada', lastName: 'Lovelace', enabled: true };
    const { id } = await kc.users.create({ ...full, attributes: { department: ['sales'] } });

    await kc.users.update({ id }, { attributes: { department: ['ops'] } });
    const replaced = await kc.users.findOne({ id });
    assert.equal(replaced?.username, 'ada');
    assert.equal(replaced?.email, undefined);
    assert.equal(replaced?.firstName, undefined);
    assert.equal(replaced?.lastName, undefined);
    assert.deepEqual(replaced?.attributes, { department: ['ops'] });
    assert.equal(replaced?.enabled, true, 'flags not sent do not change');

    await kc.users.update({ id }, { ...full, attributes: {} });
    assert.equal((await kc.users.findOne({ id }))?.attributes, undefined, 'an empty map removes every attribute');
  });

  test('PUT without attributes leaves what it does not send; the username does not change unless the realm allows it', async () => {
    const realmName = await freshRealm();
    const { id } = await kc.users.create({
      username: 'ada',
      email: 'ada@acme.example',
      firstName: 'Ada',
      lastName: 'Lovelace',
      enabled: true,
    });
    await kc.users.update({ id }, { firstName: 'Augusta', username: 'augusta' });
    const updated = await kc.users.findOne({ id });
    assert.deepEqual(
      [updated?.username, updated?.firstName, updated?.lastName, updated?.email],
      ['ada', 'Augusta', 'Lovelace', 'ada@acme.example'],
    );

    await kc.realms.update({ realm: realmName }, { editUsernameAllowed: true });
    await kc.users.update({ id }, { username: 'Augusta' });
    assert.equal((await kc.users.findOne({ id }))?.username, 'augusta', 'renamed, lower-cased');
  });

  test("a taken username or email is 409 with Keycloak's message; usernames and emails are lower-cased", async () => {
    const realmName = await freshRealm();
    const { id } = await kc.users.create({ username: 'Ada', email: 'Ada@Acme.example', enabled: true });
    const ada = await kc.users.findOne({ id });
    assert.deepEqual([ada?.username, ada?.email], ['ada', 'ada@acme.example']);
    assert.deepEqual(await refusal(kc.users.create({ username: 'grace', email: 'ADA@acme.example' })), {
      status: 409,
      body: { errorMessage: 'User exists with same email' },
    });
    assert.deepEqual(await refusal(kc.users.create({ username: 'ADA' })), {
      status: 409,
      body: { errorMessage: 'User exists with same username' },
    });
    const { id: grace } = await kc.users.create({ username: 'grace', enabled: true });
    assert.deepEqual(await refusal(kc.users.update({ id: grace }, { email: 'ada@acme.example' })), {
      status: 409,
      body: { errorMessage: 'User exists with same email' },
    });

    await kc.realms.update({ realm: realmName }, { duplicateEmailsAllowed: true });
    await kc.users.create({ username: 'alan', email: 'ada@acme.example', enabled: true });
    assert.equal(
      (await kc.users.find({ email: 'ada@acme.example', exact: true })).length,
      2,
      'with duplicateEmailsAllowed the email may repeat',
    );
  });

  test('values the user profile rejects: 400 naming the field, the message key and its parameters', async () => {
    await freshRealm();
    assert.deepEqual(await refusal(kc.users.create({ username: 'ada', email: 'not-an-email' })), {
      status: 400,
      body: { field: 'email', errorMessage: 'error-invalid-email', params: ['email', 'not-an-email'] },
    });
    assert.deepEqual(await refusal(kc.users.create({ username: 'ab' })), {
      status: 400,
      body: { field: 'username', errorMessage: 'error-invalid-length', params: ['username', 3, 255] },
    });
    assert.deepEqual(await refusal(kc.users.create({ username: 'ada lovelace' })), {
      status: 400,
      body: { field: 'username', errorMessage: 'error-username-invalid-character', params: ['username'] },
    });
    assert.deepEqual(await refusal(kc.users.create({ username: 'ab', firstName: 'Ada<script>' })), {
      status: 400,
      body: {
        errors: [
          { field: 'username', errorMessage: 'error-invalid-length', params: ['username', 3, 255] },
          { field: 'firstName', errorMessage: 'error-person-name-invalid-character', params: ['firstName'] },
        ],
      },
    });
    assert.deepEqual(await refusal(kc.users.create({ email: 'ada@acme.example' })), {
      status: 400,
      body: { errorMessage: 'User name is missing' },
    });
    assert.equal(await kc.users.count(), 0, 'nothing was created');
  });

  test('a user created without enabled is disabled; required actions and a temporary password show on the user', async () => {
    await freshRealm();
    const { id } = await kc.users.create({
      username: 'ada',
      requiredActions: ['VERIFY_EMAIL', 'NOT_AN_ACTION'],
      credentials: [{ type: 'password', value: 'correct horse', temporary: true }],
    });
    const ada = await kc.users.findOne({ id });
    assert.equal(ada?.enabled, false);
    assert.deepEqual(ada?.requiredActions, ['VERIFY_EMAIL', 'UPDATE_PASSWORD'], 'unknown actions are ignored');
    await kc.users.update({ id }, { requiredActions: [] });
    assert.deepEqual((await kc.users.findOne({ id }))?.requiredActions, [], 'a PUT with requiredActions sets exactly those');
  });

  test('search: exact username or email, prefix search, paging, brief representations, count', async () => {
    await freshRealm();
    for (const [username, email] of [
      ['ada', 'ada@acme.example'],
      ['adam', 'adam@acme.example'],
      ['grace', 'grace@navy.example'],
    ])
      await kc.users.create({ username, email, enabled: true, firstName: username === 'grace' ? 'Grace' : 'A' });
    const names = (users: Array<{ username?: string }>) => users.map((u) => u.username);
    assert.deepEqual(names(await kc.users.find({ username: 'ada', exact: true })), ['ada']);
    assert.deepEqual(names(await kc.users.find({ username: 'ada' })), ['ada', 'adam'], 'without exact the username is a substring');
    assert.deepEqual(names(await kc.users.find({ email: 'navy', exact: false })), ['grace']);
    assert.deepEqual(names(await kc.users.find({ search: 'gra' })), ['grace'], 'search is by prefix');
    assert.deepEqual(names(await kc.users.find({ search: 'race' })), [], 'not infix unless asked');
    assert.deepEqual(names(await kc.users.find({ search: '*race*' })), ['grace']);
    assert.deepEqual(names(await kc.users.find({ first: 1, max: 1 })), ['adam'], 'ordered by username, paged');
    const [brief] = await kc.users.find({ username: 'grace', exact: true, briefRepresentation: true });
    assert.equal(brief?.requiredActions, undefined, 'a brief representation has no required actions');
    assert.equal(brief?.firstName, 'Grace');
    assert.equal(await kc.users.count(), 3);
    assert.equal(await kc.users.count({ search: 'ad' }), 2);
  });

  test('delete: the user is gone and a second delete is 404', async () => {
    await freshRealm();
    const { id } = await kc.users.create({ username: 'ada', enabled: true });
    await kc.users.del({ id });
    assert.equal(await kc.users.findOne({ id }), null);
    assert.deepEqual(await refusal(kc.users.del({ id })), { status: 404, body: { error: 'User not found' } });
  });
});
