import { createHash, randomBytes } from 'node:crypto';
import { requireActiveCustomer } from '../customers/lifecycle.ts';
import type { CustomerService } from '../customers/service.ts';
import type { CustomerRow } from '../customers/store.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/database.ts';
import { ApiError, notFound } from '../infra/errors/catalogue.ts';
import type { Platform } from '../platform/platform.ts';
import { platformContext, type Tenant } from '../platform/tenant.ts';
import { allProjects, type ProjectRow } from '../projects/store.ts';
import { findUser, type UserRow } from '../users/store.ts';

/** CONTRACT §4, Console login: the URL works once, within 5 minutes. */
export const CONSOLE_LOGIN_TTL_MS = 5 * 60 * 1000;
/** How long a console session lasts once the link was opened. */
export const CONSOLE_SESSION_TTL_MS = 12 * 3600 * 1000;
export const CONSOLE_COOKIE = 'tenantry_console';

export interface ConsoleServiceDeps {
  db: Db;
  clock: Clock;
  platform: Platform;
  customers: CustomerService;
  publicUrl: () => string;
}

export interface ConsoleSession {
  customer: CustomerRow;
  user: UserRow;
  projects: ProjectRow[];
}

const hash = (secret: string) => createHash('sha256').update(secret).digest('hex');

/**
 * One-click console logins. A login is a one-time secret in a URL (only its
 * hash is stored); opening it trades it for a session cookie (again stored as
 * a hash). Login links and sessions follow the server's clock, not a test clock.
 */
export class ConsoleService {
  readonly #deps: ConsoleServiceDeps;

  constructor(deps: ConsoleServiceDeps) {
    this.#deps = deps;
  }

  async mintLogin(tenant: Tenant, customerId: string, username: string): Promise<{ url: string; expires_at: string }> {
    const { db, clock, platform, customers, publicUrl } = this.#deps;
    const customer = await customers.require(tenant, customerId);
    const user = await findUser(db, customer.uid, username);
    if (!user) throw notFound(`User ${username} of customer ${customerId}`);
    requireActiveCustomer(customer, 'log users in to the console');
    const { requiredActions } = await platform.prepareConsoleLogin(platformContext(db, tenant), { customerId, username });
    if (requiredActions.length > 0) {
      throw new ApiError('USER_ACTION_REQUIRED', `${username} must first finish in the identity provider: ${requiredActions.join(', ')}.`, {
        details: { username, required_actions: requiredActions },
      });
    }
    const token = randomBytes(32).toString('base64url');
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + CONSOLE_LOGIN_TTL_MS);
    await db
      .insertInto('console_logins')
      .values({
        token_hash: hash(token),
        partner_id: tenant.partnerId,
        mode: tenant.mode,
        customer_uid: customer.uid,
        username,
        expires_at: expiresAt,
        used_at: null,
        created_at: now,
      })
      .execute();
    return { url: `${publicUrl()}/console/login/${token}`, expires_at: expiresAt.toISOString() };
  }

  /** Trades a login link for a session, once; undefined when the link is unknown, used or expired. */
  async redeem(token: string): Promise<{ sessionId: string; expiresAt: Date } | undefined> {
    const { db, clock } = this.#deps;
    const now = clock.now();
    return db.transaction().execute(async (trx) => {
      const login = await trx
        .updateTable('console_logins')
        .set({ used_at: now })
        .where('token_hash', '=', hash(token))
        .where('used_at', 'is', null)
        .where('expires_at', '>', now)
        .returningAll()
        .executeTakeFirst();
      if (!login) return undefined;
      const sessionId = randomBytes(32).toString('base64url');
      const expiresAt = new Date(now.getTime() + CONSOLE_SESSION_TTL_MS);
      await trx
        .insertInto('console_sessions')
        .values({
          id_hash: hash(sessionId),
          partner_id: login.partner_id,
          mode: login.mode,
          customer_uid: login.customer_uid,
          username: login.username,
          expires_at: expiresAt,
          created_at: now,
        })
        .execute();
      return { sessionId, expiresAt };
    });
  }

  /** The session a cookie names, while it lasts and its customer and user exist. */
  async session(sessionId: string | undefined): Promise<ConsoleSession | undefined> {
    if (!sessionId) return undefined;
    const { db, clock } = this.#deps;
    const session = await db
      .selectFrom('console_sessions')
      .selectAll()
      .where('id_hash', '=', hash(sessionId))
      .where('expires_at', '>', clock.now())
      .executeTakeFirst();
    if (!session) return undefined;
    const customer = await db.selectFrom('customers').selectAll().where('uid', '=', session.customer_uid).executeTakeFirst();
    if (!customer || customer.status === 'deleting') return undefined;
    const user = await findUser(db, customer.uid, session.username);
    if (!user) return undefined;
    return { customer, user, projects: await allProjects(db, customer.uid) };
  }

  /** Removes expired login links and sessions. */
  async deleteExpired(): Promise<void> {
    const now = this.#deps.clock.now();
    await this.#deps.db.deleteFrom('console_logins').where('expires_at', '<', now).execute();
    await this.#deps.db.deleteFrom('console_sessions').where('expires_at', '<', now).execute();
  }
}
