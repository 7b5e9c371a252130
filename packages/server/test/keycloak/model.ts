import { randomBytes, randomUUID } from 'node:crypto';
import { defaultUserProfile, type UPConfig } from './user-profile.ts';

/**
 * A realm user as the double stores it. What the admin API shows of it depends on the realm's user
 * profile (see user-attributes.ts); the fields are what a JPA UserEntity holds.
 */
export interface KeycloakUser {
  id: string;
  username: string;
  email?: string;
  firstName?: string;
  lastName?: string;
  enabled: boolean;
  emailVerified: boolean;
  requiredActions: string[];
  /** Every stored attribute except the root ones (username, email, names), managed or not. */
  attributes: Record<string, string[]>;
  createdTimestamp: number;
  realmRoles: Set<string>;
  /** Client role mappings by the client's clientId (e.g. `realm-management` → `realm-admin`). */
  clientRoles: Map<string, Set<string>>;
  /** Ids of the groups the user is a direct member of. */
  groups: Set<string>;
  password?: string;
}

export interface Role {
  id: string;
  name: string;
  description?: string;
  composite: boolean;
  clientRole: boolean;
  containerId: string;
}

export interface Group {
  id: string;
  name: string;
  description?: string;
  attributes: Record<string, string[]>;
  realmRoles: Set<string>;
}

export interface ProtocolMapper {
  name: string;
  protocol: string;
  protocolMapper: string;
  config: Record<string, string>;
}

export interface Client {
  id: string;
  clientId: string;
  name?: string;
  description?: string;
  enabled: boolean;
  publicClient: boolean;
  bearerOnly: boolean;
  standardFlowEnabled: boolean;
  implicitFlowEnabled: boolean;
  directAccessGrantsEnabled: boolean;
  serviceAccountsEnabled: boolean;
  secret?: string;
  rootUrl?: string;
  baseUrl?: string;
  redirectUris: string[];
  webOrigins: string[];
  protocol: string;
  attributes: Record<string, string>;
  protocolMappers: ProtocolMapper[];
  roles: Map<string, Role>;
}

/** The realm settings the double keeps (RealmRepresentation fields; the defaults are a new realm's). */
export interface RealmSettings {
  displayName?: string;
  displayNameHtml?: string;
  enabled: boolean;
  accessTokenLifespan: number;
  defaultLocale?: string;
  internationalizationEnabled: boolean;
  supportedLocales: string[];
  duplicateEmailsAllowed: boolean;
  editUsernameAllowed: boolean;
  registrationEmailAsUsername: boolean;
  loginWithEmailAllowed: boolean;
  registrationAllowed: boolean;
  resetPasswordAllowed: boolean;
  verifyEmail: boolean;
  rememberMe: boolean;
  sslRequired: string;
  ssoSessionIdleTimeout: number;
  ssoSessionMaxLifespan: number;
  attributes: Record<string, string>;
}

export interface Realm extends RealmSettings {
  id: string;
  realm: string;
  roles: Map<string, Role>;
  users: Map<string, KeycloakUser>;
  groups: Map<string, Group>;
  clients: Map<string, Client>;
  userProfile: UPConfig;
}

/** How each settable RealmRepresentation field is typed; a PUT or POST sets only those it carries. */
export const REALM_FIELDS: Record<keyof RealmSettings, 'string' | 'boolean' | 'number' | 'strings' | 'map'> = {
  displayName: 'string',
  displayNameHtml: 'string',
  enabled: 'boolean',
  accessTokenLifespan: 'number',
  defaultLocale: 'string',
  internationalizationEnabled: 'boolean',
  supportedLocales: 'strings',
  duplicateEmailsAllowed: 'boolean',
  editUsernameAllowed: 'boolean',
  registrationEmailAsUsername: 'boolean',
  loginWithEmailAllowed: 'boolean',
  registrationAllowed: 'boolean',
  resetPasswordAllowed: 'boolean',
  verifyEmail: 'boolean',
  rememberMe: 'boolean',
  sslRequired: 'string',
  ssoSessionIdleTimeout: 'number',
  ssoSessionMaxLifespan: 'number',
  attributes: 'map',
};

/** Copies the settable fields the representation carries (RepresentationToModel.updateRealm skips absent ones). */
export function applyRealmFields(realm: RealmSettings, input: Record<string, unknown>): void {
  const target = realm as unknown as Record<string, unknown>;
  for (const [field, type] of Object.entries(REALM_FIELDS)) {
    const value = input[field];
    if (value === undefined || value === null) continue;
    const fits =
      (type === 'strings' && Array.isArray(value)) ||
      (type === 'map' && typeof value === 'object' && !Array.isArray(value)) ||
      typeof value === type;
    if (fits) target[field] = structuredClone(value);
  }
}

/** The roles of the `realm-management` client every realm has (the admin roles a realm's own users can hold). */
export const REALM_MANAGEMENT_ROLES = [
  'realm-admin',
  'create-client',
  'impersonation',
  'manage-authorization',
  'manage-clients',
  'manage-events',
  'manage-identity-providers',
  'manage-realm',
  'manage-users',
  'query-clients',
  'query-groups',
  'query-realms',
  'query-users',
  'view-authorization',
  'view-clients',
  'view-events',
  'view-identity-providers',
  'view-realm',
  'view-users',
];

export function role(name: string, containerId: string, clientRole: boolean, description?: string): Role {
  return { id: randomUUID(), name, composite: false, clientRole, containerId, ...(description ? { description } : {}) };
}

export function newClient(fields: Partial<Client> & { clientId: string }): Client {
  return {
    id: randomUUID(),
    enabled: true,
    publicClient: false,
    bearerOnly: false,
    standardFlowEnabled: true,
    implicitFlowEnabled: false,
    directAccessGrantsEnabled: false,
    serviceAccountsEnabled: false,
    redirectUris: [],
    webOrigins: [],
    protocol: 'openid-connect',
    attributes: {},
    protocolMappers: [],
    roles: new Map(),
    ...fields,
  };
}

/**
 * A new realm as RealmManager.createRealm sets it up: the default roles (`offline_access`,
 * `uma_authorization`, `default-roles-<realm>`), the built-in clients (`account`, `account-console`,
 * `admin-cli` (public, direct access grants), `broker`, `realm-management` (bearer-only, holding the
 * admin roles), `security-admin-console`) and the default user profile.
 */
export function newRealm(name: string): Realm {
  const id = randomUUID();
  const realm: Realm = {
    id,
    realm: name,
    // A realm POSTed without `enabled` stays disabled; the admin console always sends it.
    enabled: false,
    accessTokenLifespan: 300,
    internationalizationEnabled: false,
    supportedLocales: [],
    duplicateEmailsAllowed: false,
    editUsernameAllowed: false,
    registrationEmailAsUsername: false,
    loginWithEmailAllowed: true,
    registrationAllowed: false,
    resetPasswordAllowed: false,
    verifyEmail: false,
    rememberMe: false,
    sslRequired: 'external',
    ssoSessionIdleTimeout: 1800,
    ssoSessionMaxLifespan: 36000,
    attributes: {},
    roles: new Map(),
    users: new Map(),
    groups: new Map(),
    clients: new Map(),
    userProfile: defaultUserProfile(),
  };
  for (const name of ['offline_access', 'uma_authorization', `default-roles-${realm.realm}`]) realm.roles.set(name, role(name, id, false));
  const clients = [
    newClient({ clientId: 'account', publicClient: true }),
    newClient({ clientId: 'account-console', publicClient: true }),
    newClient({ clientId: 'admin-cli', publicClient: true, standardFlowEnabled: false, directAccessGrantsEnabled: true }),
    newClient({ clientId: 'broker', bearerOnly: true, standardFlowEnabled: false }),
    newClient({ clientId: 'realm-management', bearerOnly: true, standardFlowEnabled: false }),
    newClient({ clientId: 'security-admin-console', publicClient: true }),
  ];
  for (const client of clients) realm.clients.set(client.id, client);
  const management = clients[4];
  if (management) for (const name of REALM_MANAGEMENT_ROLES) management.roles.set(name, role(name, management.id, true));
  return realm;
}

export function newUser(username: string): KeycloakUser {
  return {
    id: randomUUID(),
    username,
    // A user created without `enabled` is disabled: UserEntity.enabled defaults to false and
    // UserResource.updateUserFromRep only sets it when the representation carries it.
    enabled: false,
    emailVerified: false,
    requiredActions: [],
    attributes: {},
    createdTimestamp: Date.now(),
    realmRoles: new Set(),
    clientRoles: new Map(),
    groups: new Set(),
  };
}

export function findClient(realm: Realm, clientId: string): Client | undefined {
  return [...realm.clients.values()].find((c) => c.clientId === clientId);
}

export function randomPassword(): string {
  return randomBytes(18).toString('base64url');
}

export function groupPath(group: Group): string {
  return `/${group.name}`;
}

/** A top-level group by its path (`/org-admin`), as KeycloakModelUtils.findGroupByPath resolves it. */
export function groupByPath(realm: Realm, path: string): Group | undefined {
  if (!path.startsWith('/')) return undefined;
  return [...realm.groups.values()].find((g) => groupPath(g) === path);
}

/** A one-time login the double handed out (an impersonation or a magic-link action token). */
export interface Login {
  realm: string;
  userId: string;
  kind: 'action-token' | 'impersonation';
}

/** One admin call below `/admin/realms/{realm}`, as the collection handlers receive it. */
export interface AdminRequest {
  method: string;
  realm: Realm;
  /** The path segments after the collection name, decoded. */
  rest: string[];
  query: URLSearchParams;
  body: unknown;
  /** The double's base URL, for `Location` headers and login links. */
  base: string;
  logins: Map<string, Login>;
}

export const realmPath = (base: string, realm: Realm): string => `${base}/admin/realms/${encodeURIComponent(realm.realm)}`;
