import { createGroup } from './groups.ts';
import { errorMessage } from './http.ts';
import { findClient, newRealm, newUser, type Realm, randomPassword } from './model.ts';
import { addClient } from './realms.ts';

/** What Kube-DC's controller writes to the Secret `<org>/realm-access`: keys `url`, `user` and `password`. */
export interface OrganizationRealmAccess {
  url: string;
  user: 'admin';
  password: string;
}

/**
 * What Kube-DC's Organization controller does in Keycloak for an Organization: this is Kube-DC's
 * behaviour, not Keycloak's, kept beside the Keycloak double so that Kube-DC's controller double can
 * call it. Sources (kube-dc/kube-dc-public @116783f, summarized in the Kube-DC facts notes §6, §7.1, §10):
 *
 * - one realm per Organization, named after it (docs/cloud/team-management.md:12;
 *   tests/e2e/organization_test.go GetRealm(ctx, token, orgName));
 * - realm displayName = the Organization's name, enabled, accessTokenLifespan 300, defaultLocale "en"
 *   (tests/e2e/organization_test.go:118-123, constants :19-24);
 * - exactly one client `kube-dc`, enabled and public, allowing the password grant
 *   (organization_test.go:127-130; tests/e2e/helpers/keycloak.go:270-287); its tokens carry `org`,
 *   `preferred_username`, `email` and `groups` (helpers/keycloak.go:266-268). The mappers that put
 *   `groups` (group names) and `org` there are inferred: the sources show the claims, not the mappers;
 * - groups `org-admin` and `user` (docs/cloud/team-management.md:40-43, :207);
 * - user `admin` (docs/platform/installation-guide.md:1745-1756), enabled, with the Organization's
 *   `spec.email`, in group `org-admin` only (organization_test.go:134-147), with a random password.
 *   The e2e test logs in as that user with admin-cli in the org realm and reads the realm, its
 *   clients and users (organization_test.go:110-147), so the user holds the realm's admin role
 *   (realm-management `realm-admin`; inferred: the sources call it the realm admin but do not name the role);
 * - the answer is the Secret `realm-access` (organization_test.go:83-91). Its `url` is a console URL
 *   whose scheme://host is Keycloak's base (:103-106); the double answers the realm's admin console URL.
 *
 * A repeat (a reconcile) re-applies the realm settings and adds what is missing; it leaves an existing
 * `admin` user (and its password) alone. When another user of the realm already has the email, the
 * user cannot be made: it throws the Refusal (409 "User exists with same email") Keycloak would answer.
 */
export function provisionOrganizationRealm(
  realms: Map<string, Realm>,
  keycloakUrl: string,
  organization: string,
  spec: { email: string },
): OrganizationRealmAccess {
  let realm = realms.get(organization);
  if (!realm) {
    realm = newRealm(organization);
    realms.set(organization, realm);
  }
  Object.assign(realm, { displayName: organization, enabled: true, accessTokenLifespan: 300, defaultLocale: 'en' });
  if (!findClient(realm, 'kube-dc'))
    addClient(realm, {
      clientId: 'kube-dc',
      enabled: true,
      publicClient: true,
      standardFlowEnabled: true,
      directAccessGrantsEnabled: true,
      protocolMappers: [
        {
          name: 'groups',
          protocol: 'openid-connect',
          protocolMapper: 'oidc-group-membership-mapper',
          config: { 'claim.name': 'groups', 'full.path': 'false' },
        },
        {
          name: 'org',
          protocol: 'openid-connect',
          protocolMapper: 'oidc-hardcoded-claim-mapper',
          config: { 'claim.name': 'org', 'claim.value': organization },
        },
      ],
    });
  for (const name of ['org-admin', 'user']) if (![...realm.groups.values()].some((g) => g.name === name)) createGroup(realm, { name });
  const orgAdmin = [...realm.groups.values()].find((g) => g.name === 'org-admin');
  let admin = [...realm.users.values()].find((u) => u.username === 'admin');
  if (!admin) {
    // Keycloak refuses the user when another one has the email (409): the controller cannot finish.
    const email = spec.email.toLowerCase();
    if (!realm.duplicateEmailsAllowed && [...realm.users.values()].some((u) => u.email === email))
      throw errorMessage(409, 'User exists with same email');
    admin = newUser('admin');
    admin.email = spec.email.toLowerCase();
    admin.enabled = true;
    admin.password = randomPassword();
    admin.realmRoles.add(`default-roles-${organization}`);
    admin.clientRoles.set('realm-management', new Set(['realm-admin']));
    if (orgAdmin) admin.groups.add(orgAdmin.id);
    realm.users.set(admin.id, admin);
  }
  return { url: `${keycloakUrl}/admin/${encodeURIComponent(organization)}/console/`, user: 'admin', password: admin.password ?? '' };
}

/** Kube-DC removes the Organization's realm with the Organization; false when it was already gone. */
export function deleteOrganizationRealm(realms: Map<string, Realm>, organization: string): boolean {
  return realms.delete(organization);
}
