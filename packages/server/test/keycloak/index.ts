import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { groupByPathRoute, groups } from './groups.ts';
import { type Answer, isObject, jaxrs, notFound, ok, parseJson, Refusal, readBody, send } from './http.ts';
import { deleteOrganizationRealm, type OrganizationRealmAccess, provisionOrganizationRealm } from './kube-dc-realm.ts';
import { type AdminRequest, type KeycloakUser, type Login, newClient, newRealm, type Realm } from './model.ts';
import { clients, createRealm, realmItself, realmRepresentation, roles } from './realms.ts';
import { authorize, Tokens } from './tokens.ts';
import { users } from './users.ts';

export { Refusal } from './http.ts';
export type { OrganizationRealmAccess } from './kube-dc-realm.ts';
export type { KeycloakUser, Realm } from './model.ts';

export interface KeycloakRequest {
  method: string;
  path: string;
  status: number;
  /** The client (clientId) whose token made the call, for admin calls. */
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

/**
 * An identity-provider test double (see README.md): the part of Keycloak 26's admin REST API and
 * token endpoint that the kubernetes platform driver and Kube-DC's Organization controller use, over
 * HTTP on loopback, behaving as Keycloak does (the user profile, PUT replacing a user's attributes,
 * Keycloak's refusals and their bodies). Not Keycloak: no login pages, no browser sessions, no token
 * signatures.
 */
export class KeycloakDouble {
  readonly realms = new Map<string, Realm>();
  readonly log: KeycloakRequest[] = [];
  /** One-time logins handed out, by the URL's token: who they log in, and how. */
  readonly logins = new Map<string, Login>();
  readonly #tokens = new Tokens();
  readonly #failures: Failure[] = [];
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #options: Required<KeycloakDoubleOptions>;
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
        send(response, { status: 500, body: { error: 'unknown_error', error_description: String(error) } });
      });
    });
    this.#server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    // The admin realm with a confidential client whose service account administers every realm.
    const admin = newRealm(this.#options.adminRealm);
    admin.enabled = true;
    const client = newClient({
      clientId: this.#options.clientId,
      secret: this.#options.clientSecret,
      serviceAccountsEnabled: true,
      standardFlowEnabled: false,
    });
    admin.clients.set(client.id, client);
    this.realms.set(admin.realm, admin);
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

  /** Forgets every issued token, as a Keycloak restart or a session revocation would. */
  revokeTokens(): void {
    this.#tokens.clear();
  }

  user(realm: string, username: string): KeycloakUser | undefined {
    return [...(this.realms.get(realm)?.users.values() ?? [])].find((u) => u.username === username.toLowerCase());
  }

  /** Sets a user's pending required actions (what a person would still have to do at their next login). */
  setRequiredActions(realm: string, username: string, actions: string[]): void {
    const user = this.user(realm, username);
    if (!user) throw new Error(`no user ${username} in realm ${realm}`);
    user.requiredActions = [...actions];
  }

  /** Sets up the realm of an Organization as Kube-DC's Organization controller does (see kube-dc-realm.ts). */
  provisionOrganizationRealm(organization: string, spec: { email: string }): OrganizationRealmAccess {
    return provisionOrganizationRealm(this.realms, this.#url, organization, spec);
  }

  /** Removes the realm of a deleted Organization; false when there was none. */
  deleteOrganizationRealm(organization: string): boolean {
    return deleteOrganizationRealm(this.realms, organization);
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((ok) => this.#server.close(() => ok()));
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://double');
    const method = request.method ?? 'GET';
    const path = url.pathname;
    const entry: KeycloakRequest = { method, path, status: 0 };
    this.log.push(entry);
    const failure = this.#failures.find((f) => f.remaining > 0 && f.match({ method, path }));
    let answer: Answer;
    if (failure) {
      failure.remaining -= 1;
      answer = { status: failure.status, body: { error: 'injected', error_description: `injected failure (${failure.status})` } };
    } else {
      const body = method === 'GET' ? '' : await readBody(request);
      try {
        answer = this.#route(method, path, url.searchParams, body, request.headers.authorization, entry);
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        answer = { status: error.status, body: error.body };
      }
    }
    entry.status = answer.status;
    send(response, answer);
  }

  #route(
    method: string,
    path: string,
    query: URLSearchParams,
    body: string,
    authorization: string | undefined,
    entry: KeycloakRequest,
  ): Answer {
    const token = /^\/realms\/([^/]+)\/protocol\/openid-connect\/token$/.exec(path);
    if (token && method === 'POST') {
      const realmName = decodeURIComponent(token[1] ?? '');
      const lifetime = realmName === this.#options.adminRealm ? this.#options.tokenLifetimeS : undefined;
      return this.#tokens.grant(this.realms.get(realmName), new URLSearchParams(body), authorization, this.#url, lifetime);
    }
    const magic = /^\/realms\/([^/]+)\/magic-link$/.exec(path);
    if (!magic && !path.startsWith('/admin/realms')) throw notFound();
    // The admin API and the magic-link extension want a live bearer token (401 otherwise).
    const session = this.#tokens.session(/^Bearer (.+)$/.exec(authorization ?? '')?.[1]);
    if (!session) throw jaxrs(401, 'HTTP 401 Unauthorized');
    entry.client = session.clientId;
    if (magic) {
      if (method !== 'POST') throw jaxrs(405, 'HTTP 405 Method Not Allowed');
      return this.#magicLink(decodeURIComponent(magic[1] ?? ''), parseJson(body));
    }
    const parts = path
      .split('/')
      .slice(3)
      .filter((p, i) => i === 0 || p !== '')
      .map(decodeURIComponent);
    authorize(session, this.#options.adminRealm, this.realms, method, parts);
    return this.#admin(method, parts, query, parseJson(body));
  }

  #admin(method: string, parts: string[], query: URLSearchParams, body: unknown): Answer {
    const [realmName, collection, ...rest] = parts;
    if (realmName === undefined || realmName === '') {
      if (method === 'POST') return createRealm(this.realms, this.#url, body);
      if (method === 'GET') return ok([...this.realms.values()].map(realmRepresentation));
      throw jaxrs(405, 'HTTP 405 Method Not Allowed');
    }
    const realm = this.realms.get(realmName);
    if (!realm) throw notFound('Realm not found.');
    if (collection === undefined) return realmItself(this.realms, method, realm, body);
    const req: AdminRequest = { method, realm, rest, query, body, base: this.#url, logins: this.logins };
    switch (collection) {
      case 'users':
        return users(req);
      case 'groups':
        return groups(req);
      case 'group-by-path':
        return groupByPathRoute(req);
      case 'clients':
        return clients(req);
      case 'roles':
        return roles(req);
      default:
        throw notFound();
    }
  }

  /** The magic-link extension (p2-inc/keycloak-magic-link): an action-token login for the user with that email. */
  #magicLink(realmName: string, input: unknown): Answer {
    const realm = this.realms.get(realmName);
    if (!realm) throw notFound('Realm not found.');
    const email = isObject(input) && typeof input.email === 'string' ? input.email.toLowerCase() : undefined;
    const user = [...realm.users.values()].find((u) => u.email === email);
    if (!user) throw notFound('User not found');
    const key = randomBytes(18).toString('base64url');
    this.logins.set(key, { realm: realmName, userId: user.id, kind: 'action-token' });
    return ok({ user_id: user.id, link: `${this.#url}/realms/${realmName}/login-actions/action-token?key=${key}`, sent: false });
  }
}
