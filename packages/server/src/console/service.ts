import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { platformContext, type Tenant } from '../auth/tenant.ts';
import { type CustomerQuotaRow, customerQuota } from '../capacity/customer-quotas.ts';
import type { CapacityTables } from '../capacity/tables.ts';
import { requireActiveCustomer } from '../customers/lifecycle.ts';
import type { CustomerService } from '../customers/service.ts';
import type { CustomerRow } from '../customers/tables.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound } from '../infra/errors/catalogue.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import type { Platform } from '../platform/platform.ts';
import type { ProjectService } from '../projects/service.ts';
import type { ProjectRow } from '../projects/tables.ts';
import { type UserService, userRef } from '../users/service.ts';
import type { UserRow } from '../users/tables.ts';
import {
  deleteExpiredConsoleAccess,
  deleteSession,
  findSession,
  insertLogin,
  insertSession,
  revokeConsoleAccess,
  useLogin,
} from './store.ts';
import type { ConsoleTables } from './tables.ts';

/** CONTRACT §4, Console login: the URL works once, within 5 minutes. */
export const CONSOLE_LOGIN_TTL_MS = 5 * 60 * 1000;
/** How long a console session lasts once the link was opened. */
export const CONSOLE_SESSION_TTL_MS = 12 * 3600 * 1000;
export const CONSOLE_COOKIE = 'tenantry_console';

export interface ConsoleServiceDeps {
  /** The customer's plan and quota are capacity's, read through it. */
  db: Db<ConsoleTables & CapacityTables>;
  clock: Clock;
  platform: Platform;
  customers: CustomerService;
  users: UserService;
  projects: ProjectService;
  partnerCache: PartnerCache;
  publicUrl: () => string;
}

export interface ConsoleSession {
  customer: CustomerRow;
  /** The customer's plan and quota. */
  quota: CustomerQuotaRow;
  user: UserRow;
  projects: ProjectRow[];
  /** The reseller: its name and its own portal, which the console links to, as Kube-DC's does. */
  partner: { display_name: string; portal_url: string | null };
  /** Forms of this session post it back (against cross-site requests). */
  csrfToken: string;
}

const hash = (secret: string) => createHash('sha256').update(secret).digest('hex');

/**
 * One-click console logins. A login is a one-time secret in a URL (only its
 * hash is stored); opening it trades it for a session cookie (again stored as
 * a hash). Both belong to a person (the user's immutable id), not to a
 * username: a user deleted and created again under the same name is someone
 * else, and the old link or session does not log them in. A session lasts while
 * its user exists, its customer is active and its partner is not suspended;
 * removing the user, suspending the customer or partner, or deleting the customer (even
 * in a deletion cancelled later) ends it for good.
 * Login links and sessions follow the server's clock, not a test clock.
 */
export class ConsoleService {
  readonly #deps: ConsoleServiceDeps;

  constructor(deps: ConsoleServiceDeps) {
    this.#deps = deps;
  }

  async mintLogin(tenant: Tenant, customerId: string, username: string): Promise<{ url: string; expires_at: string }> {
    const { db, clock, platform, customers, users, publicUrl } = this.#deps;
    const customer = await customers.require(tenant, customerId);
    const user = await users.find(customer.uid, username);
    if (!user) throw notFound(`User ${username} of customer ${customerId}`);
    requireActiveCustomer(customer, 'log users in to the console', customers.retryAfterS);
    const grant = await platform.prepareConsoleLogin(platformContext(tenant), userRef(customer, username));
    if (grant.state === 'action_required') {
      throw new ApiError('USER_ACTION_REQUIRED', `${username} must first finish in the identity provider: ${grant.actions.join(', ')}.`, {
        details: { username, required_actions: grant.actions },
      });
    }
    // A platform whose identity provider mints one-time logins itself (Keycloak) answers its URL.
    if (grant.url) return { url: grant.url, expires_at: (grant.expiresAt ?? new Date(clock.nowMs() + CONSOLE_LOGIN_TTL_MS)).toISOString() };
    const token = randomBytes(32).toString('base64url');
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + CONSOLE_LOGIN_TTL_MS);
    await insertLogin(db, {
      token_hash: hash(token),
      partner_id: tenant.partnerId,
      mode: tenant.mode,
      customer_uid: customer.uid,
      user_uid: user.uid,
      expires_at: expiresAt,
      created_at: now,
    });
    return { url: `${publicUrl()}/console/login/${token}`, expires_at: expiresAt.toISOString() };
  }

  /** Trades a login link for a session, once; undefined when the link is unknown, used or expired. */
  async redeem(token: string): Promise<{ sessionId: string; expiresAt: Date } | undefined> {
    const { db, clock } = this.#deps;
    const now = clock.now();
    return db.transaction().execute(async (trx) => {
      const login = await useLogin(trx, hash(token), now);
      if (!login) return undefined;
      const sessionId = randomBytes(32).toString('base64url');
      const expiresAt = new Date(now.getTime() + CONSOLE_SESSION_TTL_MS);
      await insertSession(trx, {
        id_hash: hash(sessionId),
        partner_id: login.partner_id,
        mode: login.mode,
        customer_uid: login.customer_uid,
        user_uid: login.user_uid,
        csrf_token: randomBytes(24).toString('base64url'),
        expires_at: expiresAt,
        created_at: now,
      });
      return { sessionId, expiresAt };
    });
  }

  /** The session a cookie names, while it lasts and its person, customer and partner allow it. */
  async session(sessionId: string | undefined): Promise<ConsoleSession | undefined> {
    if (!sessionId) return undefined;
    const { db, clock, customers, users, projects, partnerCache } = this.#deps;
    const session = await findSession(db, hash(sessionId), clock.now());
    if (!session) return undefined;
    const [user, customer, quota, partner] = await Promise.all([
      users.byUid(session.user_uid),
      customers.byUid(session.customer_uid),
      customerQuota(db, session.customer_uid),
      partnerCache.get(session.partner_id),
    ]);
    if (!user || user.customer_uid !== session.customer_uid || !quota) return undefined;
    if (customer?.status !== 'active' || partner?.status !== 'active') return undefined;
    return {
      customer,
      quota,
      user,
      projects: await projects.all(customer.uid),
      partner: { display_name: partner.display_name, portal_url: partner.portal_url },
      csrfToken: session.csrf_token,
    };
  }

  /** True when a form's token is its session's (constant time). */
  csrfMatches(session: ConsoleSession, presented: unknown): boolean {
    if (typeof presented !== 'string') return false;
    const a = Buffer.from(presented);
    const b = Buffer.from(session.csrfToken);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  /** Signs out: the session behind the cookie ends for good, here and in every process that shares the database. */
  async endSession(sessionId: string): Promise<void> {
    await deleteSession(this.#deps.db, hash(sessionId));
  }

  /** Ends a person's links and sessions (in the transaction that removes the user). */
  async revokeUser(trx: Db<ConsoleTables>, userUid: string): Promise<void> {
    await revokeConsoleAccess(trx, { userUid });
  }

  /** Ends every link and session of one customer (in the transaction that suspends or deletes it). */
  async revokeCustomer(trx: Db<ConsoleTables>, customerUid: string): Promise<void> {
    await revokeConsoleAccess(trx, { customerUid });
  }

  /** Ends every link and session of a partner's customers (partner suspension). */
  async revokePartner(trx: Db<ConsoleTables>, partnerId: string): Promise<void> {
    await revokeConsoleAccess(trx, { partnerId });
  }

  /** Removes expired login links and sessions. */
  async deleteExpired(): Promise<void> {
    await deleteExpiredConsoleAccess(this.#deps.db, this.#deps.clock.now());
  }
}
