import { randomBytes } from 'node:crypto';
import { type Answer, errorMessage, isObject, type Json, jaxrs, noContent, notFound, ok, page, queryBool, queryInt } from './http.ts';
import type { AdminRequest, KeycloakUser, Role } from './model.ts';
import { Profile, rawAttributes, stored, storedNames, userRepresentation } from './user-attributes.ts';
import { groupRepresentation, setCredentials, updateFromRepresentation } from './users.ts';

const roleRepresentation = (role: Role): Json => ({ ...role });

/** `/admin/realms/{realm}/users/{id}[/...]` (UserResource and the role mappings below it). */
export function userResource(req: AdminRequest, user: KeycloakUser): Answer {
  const { realm, method } = req;
  const [, sub, third] = req.rest;
  if (sub === undefined) {
    if (method === 'GET') return ok(userRepresentation(realm, user));
    if (method === 'PUT') return updateUser(req, user);
    if (method === 'DELETE') {
      realm.users.delete(user.id);
      return noContent();
    }
  }
  if (sub === 'groups') return memberships(req, user);
  if (sub === 'role-mappings') return roleMappings(req, user);
  if (sub === 'impersonation' && third === undefined && method === 'POST') {
    // UserResource.impersonate: a disabled user cannot be impersonated.
    if (!user.enabled) throw errorMessage(400, 'User is disabled');
    const key = randomBytes(18).toString('base64url');
    req.logins.set(key, { realm: realm.realm, userId: user.id, kind: 'impersonation' });
    return ok({ sameRealm: false, redirect: `${req.base}/realms/${encodeURIComponent(realm.realm)}/account?impersonation=${key}` });
  }
  if (sub === 'reset-password' && third === undefined && method === 'PUT') {
    // UserResource.resetPassword: BadRequestException messages; a temporary password asks for a new one.
    const credential = isObject(req.body) ? req.body : {};
    if (typeof credential.value !== 'string') throw jaxrs(400, 'No password provided');
    if (credential.value.trim() === '') throw jaxrs(400, 'Empty password not allowed');
    user.password = credential.value;
    user.requiredActions = user.requiredActions.filter((a) => a !== 'UPDATE_PASSWORD');
    if (credential.temporary === true) user.requiredActions.push('UPDATE_PASSWORD');
    return noContent();
  }
  if (sub === 'logout' && method === 'POST') return noContent();
  throw notFound();
}

/**
 * `PUT /users/{id}` (UserResource.updateUser) replaces the user's profile attributes when the body
 * carries `attributes`: a first name, last name or email left out is cleared, and so is every
 * attribute the admin may edit that is not in the map (since 24.0.4, "Partial update to user
 * attributes ... is no longer supported", and keycloak/keycloak#28220, #39411). Without `attributes`
 * the user's current values stand in for whatever the body leaves out. The username changes only when
 * the realm has editUsernameAllowed. enabled, emailVerified and requiredActions change only when sent.
 */
function updateUser(req: AdminRequest, user: KeycloakUser): Answer {
  const rep = isObject(req.body) ? req.body : {};
  const raw = rawAttributes(rep);
  const sendsAttributes = rep.attributes !== undefined && rep.attributes !== null;
  if (!sendsAttributes) for (const name of storedNames(user)) if (!raw.has(name)) raw.set(name, stored(user, name));
  const profile = new Profile(req.realm, raw, user);
  profile.validate();
  profile.apply(user, sendsAttributes);
  updateFromRepresentation(user, rep, true);
  setCredentials(user, rep);
  return noContent();
}

/** `/users/{id}/groups[/count|/{groupId}]`: direct memberships, listed by name (brief unless briefRepresentation=false). */
function memberships(req: AdminRequest, user: KeycloakUser): Answer {
  const { realm, method, query } = req;
  const target = req.rest[2];
  if (target === undefined && method === 'GET') {
    const search = query.get('search')?.toLowerCase();
    const groups = [...user.groups]
      .map((id) => realm.groups.get(id))
      .filter((g) => g !== undefined && (search === undefined || g.name.toLowerCase().includes(search)))
      .sort((a, b) => (a?.name ?? '').localeCompare(b?.name ?? ''));
    const full = queryBool(query, 'briefRepresentation') === false;
    return ok(
      page(groups, queryInt(query, 'first'), queryInt(query, 'max')).map((g) => groupRepresentation(g as NonNullable<typeof g>, full)),
    );
  }
  if (target === 'count' && method === 'GET') return ok({ count: user.groups.size });
  if (target !== undefined && (method === 'PUT' || method === 'DELETE')) {
    // UserResource.joinGroup / removeMembership: an unknown group is 404; joining twice or leaving a
    // group the user is not in changes nothing and still answers 204.
    if (!realm.groups.has(target)) throw notFound('Group not found');
    if (method === 'PUT') user.groups.add(target);
    else user.groups.delete(target);
    return noContent();
  }
  throw notFound();
}

/** Realm role mappings (RoleMapperResource): list, add and remove; every role named must exist. */
function roleMappings(req: AdminRequest, user: KeycloakUser): Answer {
  const { realm, method } = req;
  const scope = req.rest[2];
  if (scope === undefined && method === 'GET') {
    const management = [...realm.clients.values()].find((c) => c.clientId === 'realm-management');
    const held = user.clientRoles.get('realm-management');
    return ok({
      realmMappings: [...user.realmRoles]
        .map((n) => realm.roles.get(n))
        .filter((r) => r !== undefined)
        .map(roleRepresentation),
      ...(management && held?.size
        ? {
            clientMappings: {
              'realm-management': { id: management.id, client: 'realm-management', mappings: [...held].map((n) => ({ name: n })) },
            },
          }
        : {}),
    });
  }
  if (scope !== 'realm' || req.rest[3] !== undefined) throw notFound();
  if (method === 'GET')
    return ok(
      [...user.realmRoles]
        .map((n) => realm.roles.get(n))
        .filter((r) => r !== undefined)
        .map(roleRepresentation),
    );
  if (method !== 'POST' && method !== 'DELETE') throw jaxrs(405, 'HTTP 405 Method Not Allowed');
  const roles = Array.isArray(req.body) ? req.body.filter(isObject) : [];
  // The role is looked up by name and must also carry that role's id when it names one.
  for (const role of roles) {
    const known = realm.roles.get(String(role.name));
    if (!known || (role.id !== undefined && role.id !== known.id)) throw notFound('Role not found');
  }
  for (const role of roles) {
    if (method === 'POST') user.realmRoles.add(String(role.name));
    else user.realmRoles.delete(String(role.name));
  }
  return noContent();
}
