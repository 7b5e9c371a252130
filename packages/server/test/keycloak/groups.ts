import { randomUUID } from 'node:crypto';
import {
  type Answer,
  created,
  errorMessage,
  isObject,
  type Json,
  jaxrs,
  noContent,
  notFound,
  ok,
  page,
  queryBool,
  queryInt,
} from './http.ts';
import { type AdminRequest, type Group, groupByPath, type Realm, realmPath } from './model.ts';
import { userRepresentation } from './user-attributes.ts';

/** Constants.DEFAULT_MAX_RESULTS, the page a members listing answers without `max`. */
const DEFAULT_MAX = 100;

/**
 * A group as `GET /groups` and `GET /groups/{id}` show it: id, name, path, the count of subgroups
 * (always 0: the double has top-level groups only) and no expanded subgroups (since Keycloak 23 they
 * are fetched from `/children`); the full form adds attributes and role mappings.
 */
function representation(group: Group, full: boolean): Json {
  return {
    id: group.id,
    name: group.name,
    ...(group.description ? { description: group.description } : {}),
    path: `/${group.name}`,
    subGroupCount: 0,
    subGroups: [],
    ...(full ? { attributes: structuredClone(group.attributes), realmRoles: [...group.realmRoles], clientRoles: {} } : {}),
    access: { view: true, viewMembers: true, manageMembers: true, manage: true, manageMembership: true },
  };
}

function attributesOf(value: unknown): Record<string, string[]> {
  if (!isObject(value)) return {};
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === 'string')]),
  );
}

/**
 * Creates a top-level group (GroupsResource.addTopLevelGroup): a blank name is 400 "Group name is
 * missing", a name another top-level group has is 409 "Top level group named '<name>' already exists.".
 */
export function createGroup(realm: Realm, rep: Json): Group {
  const name = typeof rep.name === 'string' ? rep.name : '';
  if (name.trim() === '') throw errorMessage(400, 'Group name is missing');
  if ([...realm.groups.values()].some((g) => g.name === name)) throw errorMessage(409, `Top level group named '${name}' already exists.`);
  const group: Group = {
    id: randomUUID(),
    name,
    attributes: attributesOf(rep.attributes),
    realmRoles: new Set(),
    ...(typeof rep.description === 'string' ? { description: rep.description } : {}),
  };
  realm.groups.set(group.id, group);
  return group;
}

/** `/admin/realms/{realm}/groups[/...]` (GroupsResource, GroupResource). */
export function groups(req: AdminRequest): Answer {
  const { realm, method, query } = req;
  const [id, sub] = req.rest;
  if (id === undefined) {
    if (method === 'GET') {
      // `search` matches names case-insensitively as a substring, or exactly with exact=true; the
      // answer is brief unless briefRepresentation=false; ordered by name.
      const search = query.get('search');
      const exact = queryBool(query, 'exact') === true;
      const found = [...realm.groups.values()]
        .filter((g) => search === null || (exact ? g.name === search : g.name.toLowerCase().includes(search.toLowerCase())))
        .sort((a, b) => a.name.localeCompare(b.name));
      const full = queryBool(query, 'briefRepresentation') === false;
      return ok(page(found, queryInt(query, 'first'), queryInt(query, 'max')).map((g) => representation(g, full)));
    }
    if (method === 'POST') {
      const group = createGroup(realm, isObject(req.body) ? req.body : {});
      return created(`${realmPath(req.base, realm)}/groups/${group.id}`);
    }
    throw jaxrs(405, 'HTTP 405 Method Not Allowed');
  }
  if (id === 'count' && method === 'GET') return ok({ count: realm.groups.size });
  const group = realm.groups.get(id);
  if (!group) throw notFound('Could not find group by id');
  if (sub === undefined) {
    if (method === 'GET') return ok(representation(group, true));
    if (method === 'PUT') {
      // GroupResource.updateGroup: renaming onto a sibling's name is 409.
      const rep = isObject(req.body) ? req.body : {};
      if (typeof rep.name === 'string' && rep.name !== group.name) {
        if ([...realm.groups.values()].some((g) => g.name === rep.name))
          throw errorMessage(409, `Sibling group named '${rep.name}' already exists.`);
        group.name = rep.name;
      }
      if (rep.attributes !== undefined) group.attributes = attributesOf(rep.attributes);
      if (typeof rep.description === 'string') group.description = rep.description;
      return noContent();
    }
    if (method === 'DELETE') {
      realm.groups.delete(id);
      for (const user of realm.users.values()) user.groups.delete(id);
      return noContent();
    }
  }
  if (sub === 'members' && method === 'GET') {
    // GroupResource.getMembers: direct members ordered by username, full representations unless
    // briefRepresentation=true, paged by first/max (100).
    const members = [...realm.users.values()].filter((u) => u.groups.has(id)).sort((a, b) => a.username.localeCompare(b.username));
    const brief = queryBool(query, 'briefRepresentation') === true;
    return ok(
      page(members, queryInt(query, 'first'), queryInt(query, 'max') ?? DEFAULT_MAX).map((u) => userRepresentation(realm, u, brief)),
    );
  }
  if (sub === 'children' && method === 'GET') return ok([]);
  throw notFound();
}

/** `GET /admin/realms/{realm}/group-by-path/{path}` (RealmAdminResource.getGroupByPath). */
export function groupByPathRoute(req: AdminRequest): Answer {
  if (req.method !== 'GET') throw jaxrs(405, 'HTTP 405 Method Not Allowed');
  const group = groupByPath(req.realm, `/${req.rest.join('/')}`);
  if (!group) throw notFound('Group path does not exist');
  return ok(representation(group, true));
}
