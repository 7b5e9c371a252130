import { type Answer, created, isObject, type Json, jaxrs, notFound, ok, page, queryBool, queryInt, unexpected } from './http.ts';
import { type AdminRequest, type Group, groupByPath, type KeycloakUser, newUser, type Realm, realmPath } from './model.ts';
import { userResource } from './user.ts';
import { Profile, rawAttributes, stored, userRepresentation } from './user-attributes.ts';
import { acceptProfileConfig } from './user-profile.ts';

/** The required actions Keycloak 26 ships (RequiredActionProvider ids); others in a representation are ignored. */
const REQUIRED_ACTIONS = new Set([
  'CONFIGURE_TOTP',
  'TERMS_AND_CONDITIONS',
  'UPDATE_PASSWORD',
  'UPDATE_PROFILE',
  'VERIFY_EMAIL',
  'VERIFY_PROFILE',
  'UPDATE_EMAIL',
  'CONFIGURE_RECOVERY_AUTHN_CODES',
  'delete_account',
  'delete_credential',
  'update_user_locale',
  'webauthn-register',
  'webauthn-register-passwordless',
  'idp_link',
]);

/** Constants.DEFAULT_MAX_RESULTS: a search without `max` answers at most 100 users. */
const DEFAULT_MAX = 100;

/** `/admin/realms/{realm}/users[/...]` (UsersResource, and UserResource below a user id). */
export function users(req: AdminRequest): Answer {
  const [id, sub] = req.rest;
  if (id === undefined) {
    if (req.method === 'GET') return ok(search(req));
    if (req.method === 'POST') return createUser(req);
    throw jaxrs(405, 'HTTP 405 Method Not Allowed');
  }
  if (id === 'count' && sub === undefined && req.method === 'GET') return ok(matching(req.realm, req.query).length);
  if (id === 'profile' && sub === undefined) {
    if (req.method === 'GET') return ok(structuredClone(req.realm.userProfile));
    if (req.method === 'PUT') {
      // UserProfileResource.update replaces the whole configuration and answers it.
      req.realm.userProfile = acceptProfileConfig(req.body);
      return ok(structuredClone(req.realm.userProfile));
    }
  }
  const user = req.realm.users.get(id);
  if (!user) throw notFound('User not found');
  return userResource(req, user);
}

/**
 * `POST /users` (UsersResource.createUser): the user profile is validated first (taken username or
 * email → 409, invalid values → 400), then the user is created with the attributes the admin may write
 * (undeclared ones are dropped unless the realm's unmanagedAttributePolicy lets admins edit them), the
 * representation's flags, group paths and password. 201 with `Location: .../users/{id}`.
 */
function createUser(req: AdminRequest): Answer {
  const realm = req.realm;
  const rep = isObject(req.body) ? req.body : {};
  const raw = rawAttributes(rep);
  if (realm.registrationEmailAsUsername && typeof rep.email === 'string') raw.set('username', [rep.email]);
  const profile = new Profile(realm, raw);
  profile.validate();
  // RepresentationToModel.createGroups: a path that names no group fails the whole creation with a
  // RuntimeException ("Unable to find group specified by path"), so nothing is created.
  const groups = (Array.isArray(rep.groups) ? rep.groups : []).map((path) => {
    const group = typeof path === 'string' ? groupByPath(realm, path) : undefined;
    if (!group) throw unexpected();
    return group;
  });
  const user = newUser(profile.attributes.get('username')?.[0] ?? '');
  profile.apply(user, false);
  updateFromRepresentation(user, rep, false);
  for (const group of groups) user.groups.add(group.id);
  setCredentials(user, rep);
  user.realmRoles.add(`default-roles-${realm.realm}`);
  realm.users.set(user.id, user);
  return created(`${realmPath(req.base, realm)}/users/${user.id}`);
}

/**
 * UserResource.updateUserFromRep: enabled and emailVerified when sent; required actions, when sent,
 * become exactly the known ones listed (an update removes the others); a temporary password adds
 * UPDATE_PASSWORD.
 */
export function updateFromRepresentation(user: KeycloakUser, rep: Json, isUpdate: boolean): void {
  if (typeof rep.enabled === 'boolean') user.enabled = rep.enabled;
  if (typeof rep.emailVerified === 'boolean') user.emailVerified = rep.emailVerified;
  if (!isUpdate && typeof rep.createdTimestamp === 'number') user.createdTimestamp = rep.createdTimestamp;
  if (Array.isArray(rep.requiredActions)) {
    const wanted = rep.requiredActions.filter((a): a is string => typeof a === 'string' && REQUIRED_ACTIONS.has(a));
    const kept = isUpdate ? user.requiredActions.filter((a) => wanted.includes(a)) : [...user.requiredActions];
    user.requiredActions = [...kept, ...wanted.filter((a) => !kept.includes(a))];
  }
  const credentials = Array.isArray(rep.credentials) ? rep.credentials.filter(isObject) : [];
  if (credentials.some((c) => c.type === 'password' && c.temporary === true) && !user.requiredActions.includes('UPDATE_PASSWORD'))
    user.requiredActions.push('UPDATE_PASSWORD');
}

/** RepresentationToModel.createCredentials: a `password` credential with a value sets the password. */
export function setCredentials(user: KeycloakUser, rep: Json): void {
  for (const credential of Array.isArray(rep.credentials) ? rep.credentials.filter(isObject) : [])
    if (credential.type === 'password' && typeof credential.value === 'string') user.password = credential.value;
}

/**
 * `GET /users` (UsersResource.getUsers over JpaUserProvider.searchForUserStream): `search` matches
 * username, email, first or last name, each whitespace-separated term by prefix (`*x*` infix, `"x"`
 * exact, case-insensitive); otherwise `username`, `email`, `firstName`, `lastName` match as substrings,
 * or exactly with `exact=true`; `q=key:value` matches stored attributes; `enabled`, `emailVerified`
 * filter. Ordered by username, paged by `first` and `max` (100 when absent).
 */
function search(req: AdminRequest): Json[] {
  const { realm, query } = req;
  const found = page(matching(realm, query), queryInt(query, 'first'), queryInt(query, 'max') ?? DEFAULT_MAX);
  const brief = queryBool(query, 'briefRepresentation') === true;
  return found.map((user) => userRepresentation(realm, user, brief));
}

/** The users a search or a count selects, ordered by username. */
function matching(realm: Realm, query: URLSearchParams): KeycloakUser[] {
  let selected = [...realm.users.values()];
  const search = query.get('search');
  const enabled = queryBool(query, 'enabled');
  const emailVerified = queryBool(query, 'emailVerified');
  if (enabled !== undefined) selected = selected.filter((u) => u.enabled === enabled);
  if (emailVerified !== undefined) selected = selected.filter((u) => u.emailVerified === emailVerified);
  if (search !== null) {
    if (search.startsWith('id:')) {
      const ids = search.slice(3).trim().split(/\s+/);
      selected = selected.filter((u) => ids.includes(u.id));
    } else {
      const terms = search.trim().split(/\s+/);
      selected = selected.filter((u) => terms.every((term) => searchTerm(u, term)));
    }
  } else {
    const exact = queryBool(query, 'exact') === true;
    for (const field of ['username', 'email', 'firstName', 'lastName'] as const) {
      const wanted = query.get(field);
      if (wanted === null) continue;
      const value = wanted.toLowerCase();
      selected = selected.filter((u) => {
        const have = (u[field] ?? '').toLowerCase();
        return exact ? have === value : u[field] !== undefined && have.includes(value);
      });
    }
    // SearchQueryUtils.getFields; custom attributes match exactly (ignoring case) unless exact=false.
    const exactAttributes = queryBool(query, 'exact') !== false;
    for (const [key, value] of attributeQuery(query.get('q')))
      selected = selected.filter((u) =>
        stored(u, key).some((v) =>
          exactAttributes ? v.toLowerCase() === value.toLowerCase() : v.toLowerCase().includes(value.toLowerCase()),
        ),
      );
  }
  return selected.sort((a, b) => a.username.localeCompare(b.username));
}

function searchTerm(user: KeycloakUser, term: string): boolean {
  const value = term.toLowerCase();
  const fields = [user.username, user.email, user.firstName, user.lastName].filter((f) => f !== undefined).map((f) => f.toLowerCase());
  if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) return fields.includes(value.slice(1, -1));
  const parts = value.split('*').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const pattern = new RegExp(`^${parts.join('.*')}${value.endsWith('*') ? '' : '.*'}$`, 's');
  return fields.some((f) => pattern.test(f));
}

function attributeQuery(q: string | null): Array<[string, string]> {
  if (!q) return [];
  return q
    .trim()
    .split(/\s+/)
    .map((pair) => pair.split(':'))
    .filter((kv): kv is [string, string] => kv.length === 2 && kv[0] !== '' && kv[1] !== undefined);
}

/** A group as the membership listings show it (ModelToRepresentation.toRepresentation(group, full)). */
export function groupRepresentation(group: Group, full: boolean): Json {
  return {
    id: group.id,
    name: group.name,
    path: `/${group.name}`,
    ...(full ? { attributes: structuredClone(group.attributes), realmRoles: [...group.realmRoles], clientRoles: {} } : {}),
  };
}
