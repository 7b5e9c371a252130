import { createGroup } from './groups.ts';
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
import {
  type AdminRequest,
  applyRealmFields,
  type Client,
  newClient,
  newRealm,
  type ProtocolMapper,
  REALM_FIELDS,
  type Realm,
  randomPassword,
  realmPath,
  role,
} from './model.ts';

/** A realm as `GET /admin/realms/{realm}` shows it: its id, name and the settings the double keeps. */
export function realmRepresentation(realm: Realm): Json {
  const rep: Json = { id: realm.id, realm: realm.realm };
  for (const field of Object.keys(REALM_FIELDS) as Array<keyof typeof REALM_FIELDS>)
    if (realm[field] !== undefined) rep[field] = structuredClone(realm[field]);
  return rep;
}

/**
 * `POST /admin/realms` (RealmsAdminResource.importRealm): a realm from its representation, with the
 * groups, clients and realm roles it carries; a name in use is 409 "Conflict detected. See logs for
 * details". 201 with `Location: .../admin/realms/{name}`.
 */
export function createRealm(realms: Map<string, Realm>, base: string, input: unknown): Answer {
  const rep = isObject(input) ? input : {};
  const name = typeof rep.realm === 'string' ? rep.realm : '';
  if (name.trim() === '') throw errorMessage(400, 'Realm name cannot be empty');
  if (realms.has(name)) throw errorMessage(409, 'Conflict detected. See logs for details');
  const realm = newRealm(name);
  applyRealmFields(realm, rep);
  const roles = isObject(rep.roles) && Array.isArray(rep.roles.realm) ? rep.roles.realm.filter(isObject) : [];
  for (const r of roles)
    if (typeof r.name === 'string')
      realm.roles.set(r.name, role(r.name, realm.id, false, typeof r.description === 'string' ? r.description : undefined));
  for (const g of Array.isArray(rep.groups) ? rep.groups.filter(isObject) : []) createGroup(realm, g);
  for (const c of Array.isArray(rep.clients) ? rep.clients.filter(isObject) : []) addClient(realm, c);
  realms.set(name, realm);
  return created(realmPath(base, realm));
}

/** `/admin/realms/{realm}` itself: read, partial update (only the fields sent change; `realm` renames), delete. */
export function realmItself(realms: Map<string, Realm>, method: string, realm: Realm, body: unknown): Answer {
  if (method === 'GET') return ok(realmRepresentation(realm));
  if (method === 'DELETE') {
    realms.delete(realm.realm);
    return noContent();
  }
  if (method === 'PUT') {
    const rep = isObject(body) ? body : {};
    const rename = typeof rep.realm === 'string' && rep.realm !== realm.realm ? rep.realm : undefined;
    if (rename && realms.has(rename)) throw errorMessage(409, 'Realm with same name exists');
    applyRealmFields(realm, rep);
    if (rename) {
      realms.delete(realm.realm);
      realm.realm = rename;
      realms.set(rename, realm);
    }
    return noContent();
  }
  throw jaxrs(405, 'HTTP 405 Method Not Allowed');
}

/** A client as the clients resource shows it; a confidential client's secret included, as the admin API does. */
export function clientRepresentation(client: Client): Json {
  const { roles: _roles, secret, protocolMappers, ...rest } = client;
  return {
    ...structuredClone(rest),
    clientAuthenticatorType: 'client-secret',
    consentRequired: false,
    fullScopeAllowed: true,
    ...(secret && !client.publicClient ? { secret } : {}),
    ...(protocolMappers.length > 0 ? { protocolMappers: structuredClone(protocolMappers) } : {}),
    access: { view: true, configure: true, manage: true },
  };
}

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);

/**
 * Adds a client from its representation (ClientsResource.createClient): a clientId in use is 409
 * "Client <clientId> already exists"; a confidential client without a secret gets one.
 */
export function addClient(realm: Realm, rep: Json): Client {
  const clientId = typeof rep.clientId === 'string' ? rep.clientId : '';
  if (clientId.trim() === '') throw errorMessage(400, 'Client id is missing');
  if ([...realm.clients.values()].some((c) => c.clientId === clientId)) throw errorMessage(409, `Client ${clientId} already exists`);
  const flag = (name: string, fallback: boolean) => (typeof rep[name] === 'boolean' ? (rep[name] as boolean) : fallback);
  const client = newClient({
    clientId,
    enabled: flag('enabled', true),
    publicClient: flag('publicClient', false),
    bearerOnly: flag('bearerOnly', false),
    standardFlowEnabled: flag('standardFlowEnabled', true),
    implicitFlowEnabled: flag('implicitFlowEnabled', false),
    directAccessGrantsEnabled: flag('directAccessGrantsEnabled', false),
    serviceAccountsEnabled: flag('serviceAccountsEnabled', false),
    redirectUris: strings(rep.redirectUris),
    webOrigins: strings(rep.webOrigins),
    attributes: isObject(rep.attributes) ? (structuredClone(rep.attributes) as Record<string, string>) : {},
    protocolMappers: Array.isArray(rep.protocolMappers) ? (rep.protocolMappers.filter(isObject) as unknown as ProtocolMapper[]) : [],
    ...(typeof rep.name === 'string' ? { name: rep.name } : {}),
    ...(typeof rep.description === 'string' ? { description: rep.description } : {}),
    ...(typeof rep.rootUrl === 'string' ? { rootUrl: rep.rootUrl } : {}),
    ...(typeof rep.baseUrl === 'string' ? { baseUrl: rep.baseUrl } : {}),
    ...(typeof rep.id === 'string' ? { id: rep.id } : {}),
  });
  if (!client.publicClient && !client.bearerOnly) client.secret = typeof rep.secret === 'string' ? rep.secret : randomPassword();
  realm.clients.set(client.id, client);
  return client;
}

/**
 * `/admin/realms/{realm}/clients[/...]`: `GET ?clientId=` answers the client with exactly that
 * clientId (`search=true` makes it a case-insensitive substring), create, read, delete, and the
 * client's roles.
 */
export function clients(req: AdminRequest): Answer {
  const { realm, method, query } = req;
  const [id, sub] = req.rest;
  if (id === undefined) {
    if (method === 'GET') {
      const clientId = query.get('clientId');
      const search = queryBool(query, 'search') === true;
      const found = [...realm.clients.values()]
        .filter((c) => clientId === null || (search ? c.clientId.toLowerCase().includes(clientId.toLowerCase()) : c.clientId === clientId))
        .sort((a, b) => a.clientId.localeCompare(b.clientId));
      return ok(page(found, queryInt(query, 'first'), queryInt(query, 'max')).map(clientRepresentation));
    }
    if (method === 'POST') {
      const client = addClient(realm, isObject(req.body) ? req.body : {});
      return created(`${realmPath(req.base, realm)}/clients/${client.id}`);
    }
    throw jaxrs(405, 'HTTP 405 Method Not Allowed');
  }
  const client = realm.clients.get(id);
  if (!client) throw notFound('Could not find client');
  if (sub === undefined && method === 'GET') return ok(clientRepresentation(client));
  if (sub === undefined && method === 'DELETE') {
    realm.clients.delete(id);
    return noContent();
  }
  if (sub === 'roles' && req.rest[2] === undefined && method === 'GET') return ok([...client.roles.values()].map((r) => ({ ...r })));
  if (sub === 'client-secret' && method === 'GET') return ok({ type: 'secret', value: client.secret });
  throw notFound();
}

/** `/admin/realms/{realm}/roles[/{name}]` (RoleContainerResource): list, create (409 when taken), read, delete. */
export function roles(req: AdminRequest): Answer {
  const { realm, method } = req;
  const [name] = req.rest;
  if (name === undefined) {
    if (method === 'GET') return ok([...realm.roles.values()].map((r) => ({ ...r })));
    if (method === 'POST') {
      const rep = isObject(req.body) ? req.body : {};
      const roleName = typeof rep.name === 'string' ? rep.name : '';
      if (realm.roles.has(roleName)) throw errorMessage(409, `Role with name ${roleName} already exists`);
      realm.roles.set(roleName, role(roleName, realm.id, false, typeof rep.description === 'string' ? rep.description : undefined));
      return created(`${realmPath(req.base, realm)}/roles/${encodeURIComponent(roleName)}`);
    }
    throw jaxrs(405, 'HTTP 405 Method Not Allowed');
  }
  const found = realm.roles.get(name);
  if (!found) throw notFound('Could not find role');
  if (method === 'GET') return ok({ ...found });
  if (method === 'DELETE') {
    realm.roles.delete(name);
    for (const user of realm.users.values()) user.realmRoles.delete(name);
    return noContent();
  }
  throw jaxrs(405, 'HTTP 405 Method Not Allowed');
}
