import { refuseInTransaction } from '../../infra/db/transactions.ts';
import type { IdentityConfig } from './config.ts';

/** A refusal (or no answer: status 0) from the identity provider. */
export class IdentityError extends Error {
  override name = 'IdentityError';
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export function identityStatus(error: unknown): number | undefined {
  return error instanceof IdentityError ? error.status : undefined;
}

/** A user as the admin API represents it (Keycloak 26: a PUT replaces the whole representation). */
export interface RealmUser {
  id: string;
  username: string;
  email?: string;
  firstName?: string;
  lastName?: string;
  enabled?: boolean;
  emailVerified?: boolean;
  requiredActions?: string[];
  attributes?: Record<string, string[]>;
}

export interface RealmGroup {
  id: string;
  name: string;
  path?: string;
}

const TIMEOUT_MS = 10_000;

/**
 * The identity provider's admin REST API (Keycloak 26), the calls the driver makes and nothing else: a
 * client-credentials token from the admin realm, whether a realm exists, users, their groups, and a
 * one-time login (impersonation, or an action token through the magic-link extension). Realms are
 * Kube-DC's (its Organization controller makes and removes them): the driver never creates, changes or
 * deletes one.
 */
export class KeycloakAdmin {
  readonly #config: IdentityConfig;
  readonly #fetch: typeof fetch;
  #token: { value: string; expiresAt: number } | undefined;

  constructor(config: IdentityConfig, fetchImpl: typeof fetch = fetch) {
    this.#config = config;
    this.#fetch = fetchImpl;
  }

  async #accessToken(now = Date.now()): Promise<string> {
    if (this.#token && this.#token.expiresAt > now + 10_000) return this.#token.value;
    const response = await this.#send(
      `${this.#config.url}/realms/${encodeURIComponent(this.#config.adminRealm)}/protocol/openid-connect/token`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: this.#config.clientId,
          client_secret: this.#config.clientSecret,
        }).toString(),
      },
    );
    if (!response.ok)
      throw new IdentityError(response.status, `the identity provider refused the admin client's credentials (HTTP ${response.status})`);
    const body = (await response.json()) as { access_token?: string; expires_in?: number };
    if (!body.access_token) throw new IdentityError(502, 'the identity provider answered no access token');
    this.#token = { value: body.access_token, expiresAt: now + (body.expires_in ?? 60) * 1000 };
    return body.access_token;
  }

  async #send(url: string, init: RequestInit): Promise<Response> {
    refuseInTransaction('KeycloakAdmin');
    try {
      return await this.#fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
    } catch (error) {
      throw new IdentityError(0, `the identity provider did not answer (${(error as Error).message})`);
    }
  }

  /** An admin call; `allow` lists statuses that are answers rather than errors (404 for a lookup). */
  async #call(
    method: string,
    path: string,
    body?: unknown,
    allow: number[] = [],
  ): Promise<{ status: number; json: unknown; location: string | null }> {
    for (let attempt = 0; ; attempt += 1) {
      const token = await this.#accessToken();
      const response = await this.#send(`${this.#config.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      // A token revoked or expired early: fetch a new one once.
      if (response.status === 401 && attempt === 0) {
        this.#token = undefined;
        continue;
      }
      const text = await response.text();
      const json = text ? safeJson(text) : undefined;
      if (!response.ok && !allow.includes(response.status)) {
        const said = (json as { errorMessage?: string; error?: string } | undefined) ?? {};
        throw new IdentityError(
          response.status,
          `${method} ${path.replace(/\/users\/[^/]+/, '/users/…')}: ${said.errorMessage ?? said.error ?? `HTTP ${response.status}`}`,
        );
      }
      return { status: response.status, json, location: response.headers.get('location') };
    }
  }

  #realm(realm: string): string {
    return `/admin/realms/${encodeURIComponent(realm)}`;
  }

  async realmExists(realm: string): Promise<boolean> {
    return (await this.#call('GET', this.#realm(realm), undefined, [404])).status !== 404;
  }

  async findUser(realm: string, username: string): Promise<RealmUser | undefined> {
    const { json } = await this.#call('GET', `${this.#realm(realm)}/users?${new URLSearchParams({ username, exact: 'true' })}`);
    return (json as RealmUser[]).find((u) => u.username === username.toLowerCase());
  }

  /** The user's whole representation, or undefined when it is gone. */
  async getUser(realm: string, id: string): Promise<(RealmUser & Record<string, unknown>) | undefined> {
    const { status, json } = await this.#call('GET', `${this.#realm(realm)}/users/${encodeURIComponent(id)}`, undefined, [404]);
    return status === 404 ? undefined : (json as RealmUser & Record<string, unknown>);
  }

  /** Creates the user and answers its id; a 409 (a repeat, or the email taken) is the caller's to judge. */
  async createUser(realm: string, user: Omit<RealmUser, 'id'>): Promise<string> {
    const { location } = await this.#call('POST', `${this.#realm(realm)}/users`, user);
    const id = location?.split('/').pop();
    if (id) return id;
    const found = await this.findUser(realm, user.username);
    if (!found) throw new IdentityError(502, 'the identity provider created a user it cannot find');
    return found.id;
  }

  /**
   * Changes some of a user's fields. Keycloak 26 replaces the whole representation on PUT (fields not
   * sent are cleared): the user is read, changed and written whole.
   */
  async updateUser(realm: string, id: string, fields: Partial<RealmUser>): Promise<void> {
    const current = await this.getUser(realm, id);
    if (!current) throw new IdentityError(404, `the user ${id} of realm ${realm} is gone`);
    await this.#call('PUT', `${this.#realm(realm)}/users/${encodeURIComponent(id)}`, { ...current, ...fields });
  }

  async deleteUser(realm: string, id: string): Promise<void> {
    await this.#call('DELETE', `${this.#realm(realm)}/users/${encodeURIComponent(id)}`, undefined, [404]);
  }

  /** The realm's top-level group of that name (Kube-DC's `org-admin`, `user`), or undefined. */
  async findGroup(realm: string, name: string): Promise<RealmGroup | undefined> {
    const query = new URLSearchParams({ search: name, exact: 'true', briefRepresentation: 'true' });
    const { json } = await this.#call('GET', `${this.#realm(realm)}/groups?${query}`);
    return (json as RealmGroup[]).find((g) => g.name === name && (g.path === undefined || g.path === `/${name}`));
  }

  async userGroups(realm: string, id: string): Promise<RealmGroup[]> {
    const { json } = await this.#call('GET', `${this.#realm(realm)}/users/${encodeURIComponent(id)}/groups?briefRepresentation=true`);
    return json as RealmGroup[];
  }

  async setGroupMember(realm: string, id: string, groupId: string, member: boolean): Promise<void> {
    const path = `${this.#realm(realm)}/users/${encodeURIComponent(id)}/groups/${encodeURIComponent(groupId)}`;
    await this.#call(member ? 'PUT' : 'DELETE', path, undefined, member ? [] : [404]);
  }

  /** Keycloak impersonation: the URL that opens the user's session. */
  async impersonate(realm: string, id: string): Promise<string> {
    const { json } = await this.#call('POST', `${this.#realm(realm)}/users/${encodeURIComponent(id)}/impersonation`, {});
    const redirect = (json as { redirect?: string } | undefined)?.redirect;
    if (!redirect) throw new IdentityError(502, 'impersonation answered no redirect URL');
    return redirect;
  }

  /** An action-token login link (the magic-link extension's endpoint), valid for `lifetimeS`. */
  async actionTokenLink(realm: string, email: string, lifetimeS: number): Promise<string> {
    const { json } = await this.#call('POST', `/realms/${encodeURIComponent(realm)}/magic-link`, {
      email,
      client_id: this.#config.loginClientId,
      redirect_uri: this.#config.loginRedirectUrl,
      expiration_seconds: lifetimeS,
      force_create: false,
      send_email: false,
    });
    const link = (json as { link?: string } | undefined)?.link;
    if (!link) throw new IdentityError(502, 'the magic-link endpoint answered no link');
    return link;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
