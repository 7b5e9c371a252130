import {
  type ConsoleLoginGrant,
  type PlatformContext,
  PlatformUnavailableError,
  type Progress,
  type UserRef,
  type UserSpec,
} from '../platform.ts';
import type { Driver } from './driver.ts';
import { IdentityError, MANAGED_ATTRIBUTE, managedByTenantry, type RealmUser } from './keycloak.ts';
import { KINDS } from './kube.ts';
import { DONE, guard, orUnavailable } from './progress.ts';

/** How long an action-token login stays valid. */
export const LOGIN_LIFETIME_S = 300;

/**
 * The user in the organization's realm: created (or found) with its email and names, the organization
 * admin role granted to admins and the owner and taken from members; the owner's email also becomes
 * the Organization's contact email.
 */
export function ensureUser(d: Driver, ctx: PlatformContext, user: UserSpec): Promise<Progress> {
  return guard('user', async () => {
    const realm = user.organization;
    if (!(await d.idp.realmExists(realm)))
      return { state: 'failed', code: 'UPSTREAM_NOT_FOUND', message: `The identity realm ${realm} does not exist.` };
    const fields = {
      email: user.email.toLowerCase(),
      ...(user.firstName ? { firstName: user.firstName } : {}),
      ...(user.lastName ? { lastName: user.lastName } : {}),
    };
    let found = await d.idp.findUser(realm, user.username);
    if (!found) {
      try {
        const attributes = { [MANAGED_ATTRIBUTE]: ['tenantry'], 'tenantry.io/partner': [ctx.partnerId] };
        const id = await d.idp.createUser(realm, { username: user.username, enabled: true, requiredActions: [], attributes, ...fields });
        found = { id, username: user.username, attributes, ...fields };
      } catch (error) {
        // A repeat whose first create landed: the user is there now. Otherwise the email is another user's.
        if (!(error instanceof IdentityError && error.status === 409)) throw error;
        found = await d.idp.findUser(realm, user.username);
        if (!found)
          return {
            state: 'failed',
            code: 'UPSTREAM_409',
            message: `Another user of the identity realm ${realm} has the email ${user.email}.`,
          };
      }
    }
    // A user someone else made in the realm (Kube-DC's console, an administrator) is not taken over.
    if (!managedByTenantry(found))
      return {
        state: 'failed',
        code: 'UPSTREAM_409',
        message: `The identity realm ${realm} already has a user ${user.username} that Tenantry did not make.`,
      };
    if (differs(found, fields)) await d.idp.updateUser(realm, found.id, fields);

    const admin = user.role === 'admin' || user.isOwner;
    const roles = await d.idp.realmRoles(realm, found.id);
    if (roles.includes(d.config.identity.adminRole) !== admin)
      await d.idp.setRealmRole(realm, found.id, d.config.identity.adminRole, admin);

    if (user.isOwner) {
      const organization = await d.kube.get(KINDS.organization, user.organization, user.organization);
      if (organization && organization.spec?.email !== fields.email)
        await d.kube.mergePatch(KINDS.organization, user.organization, user.organization, { spec: { email: fields.email } });
    }
    return DONE;
  });
}

function differs(found: RealmUser, fields: Partial<RealmUser>): boolean {
  return (Object.keys(fields) as Array<keyof RealmUser>).some((key) => found[key] !== fields[key]);
}

export function deleteUser(d: Driver, _ctx: PlatformContext, user: UserRef): Promise<Progress> {
  return guard('user deletion', async () => {
    if (!(await d.idp.realmExists(user.organization))) return DONE;
    const found = await d.idp.findUser(user.organization, user.username);
    // Only a user Tenantry made is deleted; one of the same name made by someone else stays.
    if (found && managedByTenantry(found)) await d.idp.deleteUser(user.organization, found.id);
    return DONE;
  });
}

/**
 * Whether the user can be logged in now (no pending required actions, enabled), and the one-time login:
 * Tenantry's own console link (`console`, no URL here), or one the identity provider mints into Kube-DC's
 * console: an action token or impersonation (TENANTRY_IDP_LOGIN).
 */
export function prepareConsoleLogin(d: Driver, ctx: PlatformContext, user: UserRef): Promise<ConsoleLoginGrant> {
  return orUnavailable('console login', async (): Promise<ConsoleLoginGrant> => {
    const found = await d.idp.findUser(user.organization, user.username);
    if (!found) throw new PlatformUnavailableError(`The user ${user.username} is not in the identity realm ${user.organization}.`, 30);
    const actions = found.requiredActions ?? [];
    if (actions.length > 0) return { state: 'action_required', actions };
    if (found.enabled === false) return { state: 'action_required', actions: ['ACCOUNT_DISABLED'] };
    if (d.config.identity.login === 'console') return { state: 'ready' };
    if (d.config.identity.login === 'action-token') {
      if (!found.email) return { state: 'action_required', actions: ['UPDATE_EMAIL'] };
      const url = await d.idp.actionTokenLink(user.organization, found.email, LOGIN_LIFETIME_S);
      return { state: 'ready', url, expiresAt: new Date(ctx.now.getTime() + LOGIN_LIFETIME_S * 1000) };
    }
    return { state: 'ready', url: await d.idp.impersonate(user.organization, found.id) };
  });
}
