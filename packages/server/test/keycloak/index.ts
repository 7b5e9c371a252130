import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** A realm user as the admin REST API shows it (UserRepresentation, the fields the double keeps). */
export interface KeycloakUser {
  id: string;
  username: string;
  email?: string;
  firstName?: string;
  lastName?: string;
  enabled: boolean;
  emailVerified: boolean;
  requiredActions: string[];
  attributes?: Record<string, string[]>;
  createdTimestamp: number;
  realmRoles: Set<string>;
}

interface Realm {
  id: string;
  realm: string;
  enabled: boolean;
  displayName?: string;
  roles: Map<string, { id: string; name: string; description?: string }>;
  users: Map<string, KeycloakUser>;
}

export interface KeycloakRequest {
  method: string;
  path: string;
  status: number;
  client?: string;
}

interface Failure {
  remaining: number;
  status: number;
  match: (request: { method: string; path: string }) => boolean;
}

export interface KeycloakDoubleOptions {
  /** The realm whose clients may call the admin API (`master` on most installations). */
  adminRealm?: string;
  clientId?: string;
  clientSecret?: string;
  /** Lifetime of the admin access tokens it issues. */
  tokenLifetimeS?: number;
  host?: string;
}

/** Answers a request; returns null so that handlers can `return reply(...)`. */
type Reply = (status: number, body?: unknown, headers?: Record<string, string>) => null;

const json = (response: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}) => {
  response.writeHead(status, { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers });
  response.end(body === undefined ? undefined : JSON.stringify(body));
};

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * An identity-provider test double (see README.md): the subset of Keycloak's admin REST API that the
 * kubernetes platform driver uses, over HTTP on loopback. Not Keycloak: no login pages, no sessions,
 * no token signatures.
 */
export class KeycloakDouble {
  readonly realms = new Map<string, Realm>();
  readonly log: KeycloakRequest[] = [];
  readonly #tokens = new Map<string, { client: string; expiresAt: number }>();
  readonly #failures: Failure[] = [];
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #options: Required<KeycloakDoubleOptions>;
  /** One-time logins handed out, by the URL's token: who they log in, and whether they were used. */
  readonly logins = new Map<string, { realm: string; userId: string; kind: 'action-token' | 'impersonation' }>();
  #url = '';

  private constructor(options: KeycloakDoubleOptions) {
    this.#options = {
      adminRealm: options.adminRealm ?? 'master',
      clientId: options.clientId ?? 'tenantry',
      clientSecret: options.clientSecret ?? randomBytes(16).toString('hex'),
      tokenLifetimeS: options.tokenLifetimeS ?? 300,
      host: options.host ?? '127.0.0.1',
    };
    this.#server = createServer((request, response) => {
      void this.#handle(request, response).catch((error: unknown) => {
        json(response, 500, { error: String(error) });
      });
    });
    this.#server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    this.#createRealm(this.#options.adminRealm);
  }

  static async start(options: KeycloakDoubleOptions = {}): Promise<KeycloakDouble> {
    const double = new KeycloakDouble(options);
    await new Promise<void>((ok) => double.#server.listen(0, double.#options.host, ok));
    double.#url = `http://${double.#options.host}:${(double.#server.address() as AddressInfo).port}`;
    return double;
  }

  get url(): string {
    return this.#url;
  }

  get credentials(): { adminRealm: string; clientId: string; clientSecret: string } {
    return { adminRealm: this.#options.adminRealm, clientId: this.#options.clientId, clientSecret: this.#options.clientSecret };
  }

  /** Fails the next `count` requests that match with `status`. */
  failNext(options: { status: number; count?: number; match?: (request: { method: string; path: string }) => boolean }): void {
    this.#failures.push({ remaining: options.count ?? 1, status: options.status, match: options.match ?? (() => true) });
  }

  /** Forgets every admin token, as a Keycloak restart or a session revocation would. */
  revokeTokens(): void {
    this.#tokens.clear();
  }

  user(realm: string, username: string): KeycloakUser | undefined {
    return [...(this.realms.get(realm)?.users.values() ?? [])].find((u) => u.username === username);
  }

  /** Sets a user's pending required actions (what a person would still have to do at their next login). */
  setRequiredActions(realm: string, username: string, actions: string[]): void {
    const user = this.user(realm, username);
    if (!user) throw new Error(`no user ${username} in realm ${realm}`);
    user.requiredActions = [...actions];
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((ok) => this.#server.close(() => ok()));
  }

  #createRealm(name: string, displayName?: string): Realm {
    const realm: Realm = {
      id: randomUUID(),
      realm: name,
      enabled: true,
      roles: new Map(),
      users: new Map(),
      ...(displayName ? { displayName } : {}),
    };
    for (const role of ['offline_access', 'uma_authorization', `default-roles-${name}`])
      realm.roles.set(role, { id: randomUUID(), name: role });
    this.realms.set(name, realm);
    return realm;
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<null> {
    const url = new URL(request.url ?? '/', 'http://double');
    const method = request.method ?? 'GET';
    const path = url.pathname;
    const entry: KeycloakRequest = { method, path, status: 0 };
    this.log.push(entry);
    const reply: Reply = (status, body, headers) => {
      entry.status = status;
      json(response, status, body, headers);
      return null;
    };
    const failure = this.#failures.find((f) => f.remaining > 0 && f.match({ method, path }));
    if (failure) {
      failure.remaining -= 1;
      return reply(failure.status, { error: 'injected', error_description: `injected failure (${failure.status})` });
    }
    const body = method === 'GET' ? '' : await readBody(request);

    const token = /^\/realms\/([^/]+)\/protocol\/openid-connect\/token$/.exec(path);
    if (token && method === 'POST') {
      const form = new URLSearchParams(body);
      const ok =
        token[1] === this.#options.adminRealm &&
        form.get('grant_type') === 'client_credentials' &&
        form.get('client_id') === this.#options.clientId &&
        form.get('client_secret') === this.#options.clientSecret;
      if (!ok) return reply(401, { error: 'unauthorized_client', error_description: 'Invalid client or Invalid client credentials' });
      const accessToken = randomBytes(24).toString('base64url');
      this.#tokens.set(accessToken, { client: this.#options.clientId, expiresAt: Date.now() + this.#options.tokenLifetimeS * 1000 });
      return reply(200, {
        access_token: accessToken,
        expires_in: this.#options.tokenLifetimeS,
        token_type: 'Bearer',
        scope: 'profile email',
      });
    }

    const magic = /^\/realms\/([^/]+)\/magic-link$/.exec(path);
    if (magic || path.startsWith('/admin/')) {
      const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
      const session = bearer ? this.#tokens.get(bearer) : undefined;
      if (!session || session.expiresAt < Date.now()) return reply(401, { error: 'HTTP 401 Unauthorized' });
      entry.client = session.client;
    }
    if (magic && method === 'POST') return this.#magicLink(magic[1] ?? '', JSON.parse(body || '{}'), reply);
    if (!path.startsWith('/admin/realms')) return reply(404, { error: 'Not Found' });
    const parts = path.split('/').slice(3).map(decodeURIComponent); // after /admin/realms
    return this.#admin(method, parts, url.searchParams, body ? JSON.parse(body) : undefined, reply);
  }

  #magicLink(
    realmName: string,
    input: { email?: string; client_id?: string; redirect_uri?: string; expiration_seconds?: number; force_create?: boolean },
    reply: Reply,
  ): null {
    const realm = this.realms.get(realmName);
    if (!realm) return reply(404, { error: 'Realm not found.' });
    const user = [...realm.users.values()].find((u) => u.email === input.email);
    if (!user) return reply(404, { error: 'User not found' });
    const key = randomBytes(18).toString('base64url');
    this.logins.set(key, { realm: realmName, userId: user.id, kind: 'action-token' });
    return reply(200, { user_id: user.id, link: `${this.#url}/realms/${realmName}/login-actions/action-token?key=${key}`, sent: false });
  }

  #admin(method: string, parts: string[], query: URLSearchParams, input: Record<string, unknown> | undefined, reply: Reply): null {
    const [realmName, collection, id, sub, subsub] = parts;
    if (realmName === undefined || realmName === '') {
      if (method !== 'POST') return reply(405);
      const name = String(input?.realm ?? '');
      if (!name) return reply(400, { errorMessage: 'realm name is required' });
      if (this.realms.has(name)) return reply(409, { errorMessage: `Conflict detected. See logs for details` });
      this.#createRealm(name, typeof input?.displayName === 'string' ? input.displayName : undefined);
      return reply(201, undefined, { location: `${this.#url}/admin/realms/${name}` });
    }
    const realm = this.realms.get(realmName);
    if (!realm) return reply(404, { error: 'Realm not found.' });
    if (collection === undefined) {
      if (method === 'GET') return reply(200, { id: realm.id, realm: realm.realm, enabled: realm.enabled, displayName: realm.displayName });
      if (method === 'DELETE') {
        this.realms.delete(realmName);
        return reply(204);
      }
      return reply(405);
    }
    if (collection === 'roles') {
      if (method === 'POST' && id === undefined) {
        const name = String(input?.name ?? '');
        if (realm.roles.has(name)) return reply(409, { errorMessage: `Role with name ${name} already exists` });
        realm.roles.set(name, {
          id: randomUUID(),
          name,
          ...(typeof input?.description === 'string' ? { description: input.description } : {}),
        });
        return reply(201, undefined, { location: `${this.#url}/admin/realms/${realmName}/roles/${name}` });
      }
      if (method === 'GET' && id !== undefined) {
        const role = realm.roles.get(id);
        return role ? reply(200, role) : reply(404, { error: 'Could not find role' });
      }
      return reply(405);
    }
    if (collection !== 'users') return reply(404, { error: 'Not Found' });
    if (id === undefined) {
      if (method === 'GET') {
        const username = query.get('username');
        const email = query.get('email');
        const exact = query.get('exact') === 'true';
        const matches = [...realm.users.values()].filter(
          (u) =>
            (username === null || (exact ? u.username === username.toLowerCase() : u.username.includes(username.toLowerCase()))) &&
            (email === null || (exact ? u.email === email.toLowerCase() : (u.email ?? '').includes(email.toLowerCase()))),
        );
        return reply(200, matches.map(present));
      }
      if (method !== 'POST') return reply(405);
      const username = String(input?.username ?? '').toLowerCase();
      const email = typeof input?.email === 'string' ? input.email.toLowerCase() : undefined;
      if (!username) return reply(400, { errorMessage: 'User name is missing' });
      const users = [...realm.users.values()];
      if (users.some((u) => u.username === username)) return reply(409, { errorMessage: 'User exists with same username' });
      if (email && users.some((u) => u.email === email)) return reply(409, { errorMessage: 'User exists with same email' });
      const user: KeycloakUser = {
        id: randomUUID(),
        username,
        ...(email ? { email } : {}),
        ...(typeof input?.firstName === 'string' ? { firstName: input.firstName } : {}),
        ...(typeof input?.lastName === 'string' ? { lastName: input.lastName } : {}),
        enabled: input?.enabled !== false,
        emailVerified: input?.emailVerified === true,
        requiredActions: Array.isArray(input?.requiredActions) ? (input.requiredActions as string[]) : [],
        ...(input?.attributes ? { attributes: input.attributes as Record<string, string[]> } : {}),
        createdTimestamp: Date.now(),
        realmRoles: new Set([`default-roles-${realmName}`]),
      };
      realm.users.set(user.id, user);
      return reply(201, undefined, { location: `${this.#url}/admin/realms/${realmName}/users/${user.id}` });
    }
    const user = realm.users.get(id);
    if (!user) return reply(404, { error: 'User not found' });
    if (sub === undefined) {
      if (method === 'GET') return reply(200, present(user));
      if (method === 'DELETE') {
        realm.users.delete(id);
        return reply(204);
      }
      if (method === 'PUT') {
        for (const field of ['email', 'firstName', 'lastName'] as const)
          if (typeof input?.[field] === 'string') user[field] = String(input[field]);
        if (typeof input?.enabled === 'boolean') user.enabled = input.enabled;
        if (typeof input?.emailVerified === 'boolean') user.emailVerified = input.emailVerified;
        if (Array.isArray(input?.requiredActions)) user.requiredActions = input.requiredActions as string[];
        if (input?.attributes) user.attributes = input.attributes as Record<string, string[]>;
        return reply(204);
      }
      return reply(405);
    }
    if (sub === 'impersonation' && method === 'POST') {
      const key = randomBytes(18).toString('base64url');
      this.logins.set(key, { realm: realmName, userId: id, kind: 'impersonation' });
      return reply(200, { sameRealm: false, redirect: `${this.#url}/realms/${realmName}/account?impersonation=${key}` });
    }
    if (sub === 'role-mappings' && subsub === 'realm') {
      if (method === 'GET') return reply(200, [...user.realmRoles].map((name) => realm.roles.get(name)).filter(Boolean));
      const roles = Array.isArray(input) ? (input as Array<{ name?: string }>) : [];
      for (const role of roles) if (!realm.roles.has(role.name ?? '')) return reply(404, { error: 'Role not found' });
      for (const role of roles) {
        if (method === 'POST') user.realmRoles.add(role.name ?? '');
        else if (method === 'DELETE') user.realmRoles.delete(role.name ?? '');
      }
      return reply(204);
    }
    return reply(404, { error: 'Not Found' });
  }
}

function present(user: KeycloakUser): Record<string, unknown> {
  const { realmRoles: _roles, ...rest } = user;
  return { ...rest, totp: false };
}
