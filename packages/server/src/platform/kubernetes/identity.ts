import {
  type ConsoleLoginGrant,
  type PlatformContext,
  PlatformUnavailableError,
  type Progress,
  type UserRef,
  type UserSpec,
} from '../platform.ts';
import { organizationEmail } from './config.ts';
import type { Driver } from './driver.ts';
import { IdentityError, type RealmUser } from './keycloak.ts';
import { DONE, guard, orUnavailable } from './progress.ts';
import { CREATING, readUserRecord, recordUser } from './user-record.ts';

/** How long an action-token login stays valid. */
export const LOGIN_LIFETIME_S = 300;

/**
 * Kube-DC grants access by the groups of the organization's realm (docs/cloud/team-management.md):
 * `org-admin` maps to `admin` in every project, `user` to `user`.
 */
export const KUBE_DC_GROUPS = { admin: 'org-admin', member: 'user' } as const;

/**
 * The user in the organization's realm, which Kube-DC's Organization controller made: created (or
 * found, if Tenantry made it) with its email and names, and in the group of its role: the owner and
 * admins in `org-admin`, members in `user`. A user of that name that Tenantry did not make is never
 * taken over (`UPSTREAM_409`). Only these two group memberships are Tenantry's: others (Kube-DC's
 * OrganizationGroups) are left as they are.
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
    const recorded = (await readUserRecord(d, realm))[user.username];
    let found = await d.idp.findUser(realm, user.username);
    if (found && recorded !== found.id && recorded !== CREATING) return notOurs(realm, user.username);
    if (!found) {
      if (recorded !== CREATING) await recordUser(d, ctx, user, user.username, CREATING);
      try {
        const id = await d.idp.createUser(realm, { username: user.username, enabled: true, requiredActions: [], ...fields });
        found = { id, username: user.username, ...fields };
      } catch (error) {
        // A repeat whose first create landed: the user is there now. Otherwise the email is another user's.
        if (!(error instanceof IdentityError && error.status === 409)) throw error;
        found = await d.idp.findUser(realm, user.username);
        if (!found) {
          await recordUser(d, ctx, user, user.username, null);
          return emailTaken(d, realm, fields.email);
        }
      }
    }
    if (recorded !== found.id) await recordUser(d, ctx, user, user.username, found.id);
    if (differs(found, fields)) await d.idp.updateUser(realm, found.id, fields);

    const wanted = user.role === 'admin' || user.isOwner ? KUBE_DC_GROUPS.admin : KUBE_DC_GROUPS.member;
    const other = wanted === KUBE_DC_GROUPS.admin ? KUBE_DC_GROUPS.member : KUBE_DC_GROUPS.admin;
    const groups = new Map((await d.idp.userGroups(realm, found.id)).map((g) => [g.name, g]));
    if (!groups.has(wanted)) {
      const group = await d.idp.findGroup(realm, wanted);
      if (!group)
        return {
          state: 'failed',
          code: 'UPSTREAM_NOT_FOUND',
          message: `The identity realm ${realm} has no group ${wanted} (Kube-DC makes it with the Organization).`,
        };
      await d.idp.setGroupMember(realm, found.id, group.id, true);
    }
    const leaving = groups.get(other);
    if (leaving) await d.idp.setGroupMember(realm, found.id, leaving.id, false);
    return DONE;
  });
}

function notOurs(realm: string, username: string): Progress {
  return {
    state: 'failed',
    code: 'UPSTREAM_409',
    message: `The identity realm ${realm} already has a user ${username} that Tenantry did not make.`,
  };
}

function emailTaken(d: Driver, realm: string, email: string): Progress {
  const admin = email === organizationEmail(d.config, realm).toLowerCase();
  return {
    state: 'failed',
    code: 'UPSTREAM_409',
    message: admin
      ? `The email ${email} is the address of the identity realm ${realm}'s admin user (TENANTRY_ORGANIZATION_EMAIL); give the user another.`
      : `Another user of the identity realm ${realm} has the email ${email}.`,
  };
}

function differs(found: RealmUser, fields: Partial<RealmUser>): boolean {
  return (Object.keys(fields) as Array<keyof RealmUser>).some((key) => found[key] !== fields[key]);
}

/** Removes the user from the realm, if Tenantry made it; one of the same name made by someone else stays. */
export function deleteUser(d: Driver, ctx: PlatformContext, user: UserRef): Promise<Progress> {
  return guard('user deletion', async () => {
    const recorded = (await readUserRecord(d, user.organization))[user.username];
    if (recorded === undefined) return DONE;
    if (await d.idp.realmExists(user.organization)) {
      const found = await d.idp.findUser(user.organization, user.username);
      if (found && (recorded === found.id || recorded === CREATING)) await d.idp.deleteUser(user.organization, found.id);
    }
    await recordUser(d, ctx, user, user.username, null);
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
