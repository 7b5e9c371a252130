import { randomBytes, randomUUID } from 'node:crypto';
import { type Answer, forbidden, jaxrs, ok, Refusal } from './http.ts';
import { type Client, findClient, type KeycloakUser, REALM_MANAGEMENT_ROLES, type Realm } from './model.ts';

/** Who an access token speaks for: a client's service account, or a realm user through a client. */
export interface Session {
  realm: string;
  clientId: string;
  userId?: string;
  expiresAt: number;
}

const oauth = (status: number, error: string, description: string) => new Refusal(status, { error, error_description: description });

/** ClientIdAndSecretAuthenticator's refusal, the same for an unknown client and a wrong secret. */
const badClient = () => oauth(401, 'unauthorized_client', 'Invalid client or Invalid client credentials');

/**
 * Tokens the double issued. They are JWT-shaped (the official admin client decodes `exp` to know when
 * to refresh) but their signature is random: the double checks a bearer by looking it up, never by
 * verifying it, and nothing outside should verify it either.
 */
export class Tokens {
  readonly #access = new Map<string, Session>();
  readonly #refresh = new Map<string, Session>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  clear(): void {
    this.#access.clear();
    this.#refresh.clear();
  }

  /** The live session behind a bearer token, or undefined (unknown, revoked or expired). */
  session(bearer: string | undefined): Session | undefined {
    const session = bearer ? this.#access.get(bearer) : undefined;
    return session && session.expiresAt > this.#now() ? session : undefined;
  }

  /**
   * `POST /realms/{realm}/protocol/openid-connect/token` for the grants the double knows:
   * client_credentials (a confidential client with service accounts), password (a client with direct
   * access grants; public clients send no secret) and refresh_token. Client credentials come as HTTP
   * Basic or as form fields, both of which Keycloak accepts. Refusals are Keycloak's
   * (ResourceOwnerPasswordCredentialsGrantType, ClientCredentialsGrantType, ValidateUsername/Password).
   */
  grant(realm: Realm | undefined, form: URLSearchParams, authorization: string | undefined, issuer: string, lifetimeS?: number): Answer {
    if (!realm) throw jaxrs(404, 'Realm does not exist');
    const grantType = form.get('grant_type');
    if (!grantType) throw oauth(400, 'invalid_request', 'Missing form parameter: grant_type');
    const basic = /^Basic (.+)$/i.exec(authorization ?? '')?.[1];
    const [basicId, basicSecret] = basic ? decodeBasic(basic) : [];
    const client = findClient(realm, basicId ?? form.get('client_id') ?? '');
    if (!client?.enabled) throw badClient();
    if (!client.publicClient && (client.bearerOnly || (basicSecret ?? form.get('client_secret')) !== client.secret)) throw badClient();
    const lifetime = lifetimeS ?? realm.accessTokenLifespan;
    if (grantType === 'client_credentials') {
      if (client.publicClient) throw oauth(401, 'unauthorized_client', 'Public client not allowed to retrieve service account');
      if (!client.serviceAccountsEnabled) throw oauth(401, 'unauthorized_client', 'Client not enabled to retrieve service account');
      return ok(this.#issue({ realm: realm.realm, clientId: client.clientId }, realm, client, undefined, lifetime, issuer, false));
    }
    if (grantType === 'password') {
      if (!client.directAccessGrantsEnabled) throw oauth(400, 'unauthorized_client', 'Client not allowed for direct access grants');
      const user = findLogin(realm, form.get('username') ?? '');
      if (!user) throw oauth(401, 'invalid_grant', 'Invalid user credentials');
      if (!user.enabled) throw oauth(400, 'invalid_grant', 'Account disabled');
      if (user.password === undefined || user.password !== form.get('password'))
        throw oauth(401, 'invalid_grant', 'Invalid user credentials');
      if (user.requiredActions.length > 0) throw oauth(400, 'invalid_grant', 'Account is not fully set up');
      return ok(
        this.#issue({ realm: realm.realm, clientId: client.clientId, userId: user.id }, realm, client, user, lifetime, issuer, true),
      );
    }
    if (grantType === 'refresh_token') {
      const previous = this.#refresh.get(form.get('refresh_token') ?? '');
      if (!previous || previous.realm !== realm.realm || previous.expiresAt <= this.#now())
        throw oauth(400, 'invalid_grant', 'Invalid refresh token');
      if (previous.clientId !== client.clientId)
        throw oauth(400, 'invalid_grant', "Invalid refresh token. Token client and authorized client don't match");
      const user = previous.userId ? realm.users.get(previous.userId) : undefined;
      if (previous.userId && !user?.enabled) throw oauth(400, 'invalid_grant', 'User disabled');
      return ok(this.#issue({ ...previous }, realm, client, user, lifetime, issuer, true));
    }
    throw oauth(400, 'unsupported_grant_type', 'Unsupported grant_type');
  }

  #issue(
    session: Omit<Session, 'expiresAt'>,
    realm: Realm,
    client: Client,
    user: KeycloakUser | undefined,
    lifetimeS: number,
    issuer: string,
    refresh: boolean,
  ) {
    const now = Math.floor(this.#now() / 1000);
    const claims: Record<string, unknown> = {
      exp: now + lifetimeS,
      iat: now,
      jti: randomUUID(),
      iss: `${issuer}/realms/${realm.realm}`,
      sub: user?.id ?? `service-account-${client.id}`,
      typ: 'Bearer',
      azp: client.clientId,
      scope: user ? 'openid profile email' : 'profile email',
      ...(user ? userClaims(realm, client, user) : { preferred_username: `service-account-${client.clientId}` }),
    };
    const accessToken = jwt(claims);
    this.#access.set(accessToken, { ...session, expiresAt: (now + lifetimeS) * 1000 });
    const answer: Record<string, unknown> = {
      access_token: accessToken,
      expires_in: lifetimeS,
      refresh_expires_in: refresh ? realm.ssoSessionIdleTimeout : 0,
      token_type: 'Bearer',
      'not-before-policy': 0,
      scope: claims.scope,
    };
    if (refresh) {
      const refreshToken = jwt({
        exp: now + realm.ssoSessionIdleTimeout,
        iat: now,
        jti: randomUUID(),
        typ: 'Refresh',
        azp: client.clientId,
      });
      this.#refresh.set(refreshToken, { ...session, expiresAt: (now + realm.ssoSessionIdleTimeout) * 1000 });
      answer.refresh_token = refreshToken;
      answer.id_token = jwt({ ...claims, typ: 'ID', aud: client.clientId });
      answer.session_state = randomUUID();
    }
    return answer;
  }
}

function decodeBasic(value: string): [string, string] {
  const text = Buffer.from(value, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  // client_secret_basic form-encodes both parts (RFC 6749 §2.3.1), as the official admin client does.
  const decode = (s: string) => decodeURIComponent(s.replaceAll('+', ' '));
  return [decode(text.slice(0, colon)), decode(text.slice(colon + 1))];
}

/** The user a login names: by username, or by email when the realm allows logging in with it. */
function findLogin(realm: Realm, login: string): KeycloakUser | undefined {
  const name = login.toLowerCase();
  const users = [...realm.users.values()];
  return users.find((u) => u.username === name) ?? (realm.loginWithEmailAllowed ? users.find((u) => u.email === name) : undefined);
}

/**
 * The user claims of the default client scopes (profile, email, roles), plus the claims of the
 * client's protocol mappers the double understands: `oidc-group-membership-mapper` (group names, or
 * paths with `full.path`) and `oidc-hardcoded-claim-mapper`.
 */
function userClaims(realm: Realm, client: Client, user: KeycloakUser): Record<string, unknown> {
  const name = [user.firstName, user.lastName].filter(Boolean).join(' ');
  const claims: Record<string, unknown> = {
    preferred_username: user.username,
    email_verified: user.emailVerified,
    ...(user.email ? { email: user.email } : {}),
    ...(user.firstName ? { given_name: user.firstName } : {}),
    ...(user.lastName ? { family_name: user.lastName } : {}),
    ...(name ? { name } : {}),
    realm_access: { roles: [...user.realmRoles] },
    resource_access: Object.fromEntries([...user.clientRoles].map(([id, roles]) => [id, { roles: [...roles] }])),
  };
  for (const mapper of client.protocolMappers) {
    const claim = mapper.config['claim.name'];
    if (!claim) continue;
    if (mapper.protocolMapper === 'oidc-group-membership-mapper') {
      const groups = [...user.groups].map((id) => realm.groups.get(id)).filter((g) => g !== undefined);
      claims[claim] = groups.map((g) => (mapper.config['full.path'] === 'true' ? `/${g.name}` : g.name));
    } else if (mapper.protocolMapper === 'oidc-hardcoded-claim-mapper') claims[claim] = mapper.config['claim.value'];
  }
  return claims;
}

function jwt(payload: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'RS256', typ: 'JWT', kid: 'keycloak-double' })}.${part(payload)}.${randomBytes(32).toString('base64url')}`;
}

/**
 * Whether a session may make an admin call, modelled coarsely: a token of the admin realm (the
 * service account of its confidential client, or a user with the realm role `admin`) may call every
 * realm's admin API, as a master-realm admin may; a user token of any other realm may call only that
 * realm's API, and only with a `realm-management` role that covers the call (realm-admin covers all;
 * view-X/manage-X for reading, manage-X for writing). Fine-grained admin permissions are not modelled.
 * Refused calls answer 403.
 */
export function authorize(session: Session, adminRealm: string, realms: Map<string, Realm>, method: string, parts: string[]): void {
  const [target, collection, id, sub] = parts;
  if (session.realm === adminRealm) {
    const realm = realms.get(adminRealm);
    const user = session.userId ? realm?.users.get(session.userId) : undefined;
    if (!session.userId || user?.realmRoles.has('admin')) return;
    throw forbidden();
  }
  if (!target || target !== session.realm || !session.userId) throw forbidden();
  const user = realms.get(target)?.users.get(session.userId);
  const held = user?.clientRoles.get('realm-management') ?? new Set<string>();
  if (held.has('realm-admin')) return;
  const read = method === 'GET';
  let needed: string[];
  if (collection === undefined) needed = read ? REALM_MANAGEMENT_ROLES : ['manage-realm'];
  else if (collection === 'users' && id === 'profile')
    needed = read ? ['view-realm', 'manage-realm', 'view-users', 'manage-users'] : ['manage-realm'];
  else if (collection === 'users' && sub === 'impersonation') needed = ['impersonation'];
  else if (collection === 'users') needed = read ? ['view-users', 'manage-users', 'query-users'] : ['manage-users'];
  else if (collection === 'groups' || collection === 'group-by-path')
    needed = read ? ['view-users', 'manage-users', 'query-groups'] : ['manage-users'];
  else if (collection === 'clients') needed = read ? ['view-clients', 'manage-clients', 'query-clients'] : ['manage-clients'];
  else needed = read ? ['view-realm', 'manage-realm'] : ['manage-realm'];
  if (!needed.some((r) => held.has(r))) throw forbidden();
}
