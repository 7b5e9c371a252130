import type { Logger } from 'pino';
import { platformContext, type Tenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { uniqueViolation } from '../infra/db/database.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import { answerWith } from '../infra/idempotency/answer.ts';
import type { IdempotencyTables } from '../infra/idempotency/tables.ts';
import { newId } from '../infra/ids.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import { reservedUsername } from '../platform/names.ts';
import type { Platform, PlatformContext, Progress, UserRef, UserSpec } from '../platform/platform.ts';
import type { UserCustomer, UserCustomers } from './customers.ts';
import { UserReadiness } from './readiness.ts';
import { type CreateUserRequest, toUser, type User } from './schemas.ts';
import {
  findUser,
  findUserByUid,
  insertUser,
  listUsers,
  ownerForPlatformOf,
  removeUserByUid,
  setOwnerReady,
  setUserPlatformState,
  setUserRequiredActions,
  type UserForPlatform,
  type UserRow,
  userInsert,
  usersToReconcile,
} from './store.ts';
import type { UserTables } from './tables.ts';

/** A user change also writes the idempotent answer (and locks the customer, through `UserCustomers`). */
type UserServiceDb = Db<UserTables & IdempotencyTables>;

export interface UserServiceDeps {
  db: UserServiceDb;
  clock: Clock;
  logger: Logger;
  cursors: CursorCodec;
  platform: Platform;
  customers: UserCustomers;
  /** Called in the transaction that removes a user: whatever was granted to that person ends with it. */
  onUserRemoved: (trx: UserServiceDb, userUid: string) => Promise<void>;
}

/** A user left pending or removing this long by a request (a crash, an outage) is finished by the reconciler. */
const RECONCILE_AFTER_MS = 60_000;

/**
 * Records the actions the identity provider asks of a user before the next sign-in (test mode sets
 * them, as the identity provider's administrators would); undefined when the customer has no such user.
 */
export function setRequiredActionsOf(
  db: Db<UserTables>,
  customerUid: string,
  username: string,
  actions: string[],
): Promise<UserRow | undefined> {
  return setUserRequiredActions(db, customerUid, username, actions);
}

/** Writes new customers' owners in the caller's transaction (the one that writes the customers), in one insert. */
export async function addOwners(trx: Db<UserTables>, rows: readonly UserRow[]): Promise<void> {
  await userInsert(trx, rows).execute();
}

/** The customer's owner as the platform needs it: a subquery for the caller's statement. */
export function ownerForPlatform(customerUid: string) {
  return ownerForPlatformOf(customerUid);
}

/** The owner was made on the platform with its customer: ready, in the caller's transaction (nothing done when it already was). */
export async function ownerMadeReady(trx: Db<UserTables>, customerUid: string, at: Date): Promise<void> {
  await setOwnerReady(trx, { customerUid, at });
}

/** A user as the platform names it. */
export function userRef(customer: Pick<UserCustomer, 'id' | 'organization'>, username: string): UserRef {
  return { customerId: customer.id, organization: customer.organization, username };
}

/** A user as the platform's identity provider takes it. */
export function userSpec(customer: Pick<UserCustomer, 'id' | 'organization'>, row: UserForPlatform): UserSpec {
  return {
    ...userRef(customer, row.username),
    email: row.email,
    role: row.role,
    isOwner: row.is_owner,
    firstName: row.first_name,
    lastName: row.last_name,
  };
}

/**
 * A customer's users (CONTRACT §4), kept in the platform's identity provider. A create records the
 * user (claiming its name and email), asks the platform with no transaction open, and answers 201
 * once the platform has it; if the platform cannot, the record is taken back and the answer is 503
 * UNAVAILABLE, so a failed create leaves nothing. A delete hides the user at once and removes it
 * from the platform after its transaction. What a killed process leaves half-done, the reconciler
 * (a sweep of the operation engine) finishes a minute later.
 */
export class UserService {
  readonly #deps: UserServiceDeps;
  readonly #readiness: UserReadiness;

  constructor(deps: UserServiceDeps) {
    this.#deps = deps;
    this.#readiness = new UserReadiness(deps.clock, deps.logger);
  }

  async create(tenant: Tenant, customerId: string, request: CreateUserRequest): Promise<User> {
    const { db, clock } = this.#deps;
    const reserved = reservedUsername(request.username);
    if (reserved) throw validationError([{ in: 'body', field: 'username', message: reserved }]);
    let row: UserRow;
    let customer: UserCustomer;
    try {
      ({ row, customer } = await db.transaction().execute(async (trx) => {
        const locked = await this.#deps.customers.lockActive(trx, tenant, customerId, 'add users');
        if (await findUser(trx, locked.uid, request.username)) throw usernameTaken(customerId, request.username);
        const user: UserRow = {
          uid: newId('user'),
          customer_uid: locked.uid,
          platform_scope: locked.platform_scope,
          partner_id: tenant.partnerId,
          mode: tenant.mode,
          customer_id: customerId,
          username: request.username,
          email: request.email,
          email_key: request.email.toLowerCase(),
          role: request.role ?? 'member',
          is_owner: false,
          first_name: request.first_name ?? null,
          last_name: request.last_name ?? null,
          required_actions: [],
          created_at: tenant.now,
          platform_state: 'pending',
          platform_state_at: clock.now(),
        };
        await insertUser(trx, user);
        return { row: user, customer: locked };
      }));
    } catch (error) {
      const constraint = uniqueViolation(error);
      if (constraint === 'users_customer_email_key') {
        throw new ApiError('ALREADY_EXISTS', `Customer ${customerId} already has a user with the email ${request.email}.`, {
          details: { field: 'email', value: request.email },
        });
      }
      if (constraint !== undefined) throw usernameTaken(customerId, request.username);
      throw error;
    }
    const progress = await this.#ensure(platformContext(tenant), customer, row);
    if (progress.state === 'done') {
      // The user is made when it is ready: the answer commits with that, and a request cut before it
      // leaves a pending user that the reconciler takes back.
      return db.transaction().execute(async (trx) => {
        await setUserPlatformState(trx, row.uid, 'ready', clock.now());
        return answerWith(trx, toUser(row));
      });
    }
    // The platform did not take the user: take the record back, so the failed create leaves nothing.
    await this.#undo(platformContext(tenant), customer, row);
    const why =
      progress.state === 'failed'
        ? `${progress.code}: ${progress.message}`
        : progress.state === 'unavailable'
          ? progress.reason
          : 'still in progress';
    throw new ApiError('UNAVAILABLE', `The identity provider did not create ${request.username} (${why}). Retry later.`, { retryAfter: 5 });
  }

  /** A user by immutable identity (console sessions name it), whoever's it is. */
  async byUid(uid: string): Promise<UserRow | undefined> {
    return findUserByUid(this.#deps.db, uid);
  }

  /** A user of a customer by username, or undefined. */
  async find(customerUid: string, username: string): Promise<UserRow | undefined> {
    return findUser(this.#deps.db, customerUid, username);
  }

  async get(tenant: Tenant, customerId: string, username: string): Promise<User> {
    const customer = await this.#deps.customers.require(tenant, customerId);
    const row = await findUser(this.#deps.db, customer.uid, username);
    if (!row) throw notFound(`User ${username} of customer ${customerId}`);
    return toUser(row);
  }

  async list(tenant: Tenant, customerId: string, query: { limit: number; cursor?: string | undefined }): Promise<Page<User>> {
    const customer = await this.#deps.customers.require(tenant, customerId);
    return listUsers(this.#deps.db, this.#deps.cursors.scoped(tenant), customer.uid, query);
  }

  /** Removes a user; the owner admin cannot be removed (403 FORBIDDEN). */
  async delete(tenant: Tenant, customerId: string, username: string): Promise<{ username: string; deleted: true }> {
    const { db, clock, platform } = this.#deps;
    const { customer, user } = await db.transaction().execute(async (trx) => {
      const locked = await this.#deps.customers.lock(trx, tenant, customerId);
      const found = await findUser(trx, locked.uid, username);
      if (!found) throw notFound(`User ${username} of customer ${customerId}`);
      if (found.is_owner) {
        throw new ApiError('FORBIDDEN', `${username} is the owner admin of customer ${customerId} and cannot be deleted.`, {
          details: { customer_id: customerId, username, is_owner: true },
        });
      }
      if (locked.status === 'deleting') {
        throw new ApiError('CONFLICT', `Customer ${customerId} is being deleted; its users go with it.`, {
          details: { customer_id: customerId, status: locked.status },
        });
      }
      // Gone for Tenantry at once: hidden from reads, console access ended; the platform follows.
      await setUserPlatformState(trx, found.uid, 'removing', clock.now());
      await this.#deps.onUserRemoved(trx, found.uid);
      await answerWith(trx, { username, deleted: true as const });
      return { customer: locked, user: found };
    });
    const progress = await platform.deleteUser(platformContext(tenant), userRef(customer, user.username)).catch(() => undefined);
    if (progress?.state === 'done') await removeUserByUid(db, user.uid);
    return { username, deleted: true as const };
  }

  /**
   * The owner admin of a new customer on the platform (a step of `customer.create`, once its
   * organization exists), as `ownerForPlatformOf` reads it.
   */
  async ensureOwner(
    ctx: PlatformContext,
    customer: Pick<UserCustomer, 'id' | 'organization'>,
    owner: UserForPlatform | null,
  ): Promise<Progress> {
    if (!owner) return { state: 'failed', code: 'PROVISIONING_FAILED', message: `Customer ${customer.id} has no owner.` };
    return this.#deps.platform.ensureUser(ctx, userSpec(customer, owner));
  }

  /**
   * The reconciler: a user a request left `pending` (it never answered 201) is taken back, and one
   * left `removing` is removed from the platform, a minute after. Answers how many it settled.
   */
  readonly reconcile = async (): Promise<number> => {
    const { db, clock, logger } = this.#deps;
    const rows = await usersToReconcile(db, new Date(clock.nowMs() - RECONCILE_AFTER_MS), 50);
    let settled = 0;
    for (const row of rows) {
      const customer = await this.#deps.customers.byUid(row.customer_uid);
      if (!customer) {
        await removeUserByUid(db, row.uid);
        continue;
      }
      const ctx: PlatformContext = { partnerId: row.partner_id, mode: row.mode, now: clock.now() };
      try {
        if (await this.#undo(ctx, customer, row)) settled++;
      } catch (err) {
        logger.warn({ err, user: row.uid }, 'settling a half-made user failed; it will be tried again');
        await setUserPlatformState(db, row.uid, row.platform_state, clock.now());
      }
    }
    return settled;
  };

  /** Asks the platform for the user; while it reports progress, the readiness loop waits for it. */
  #ensure(ctx: PlatformContext, customer: UserCustomer, row: UserRow): Promise<Progress> {
    return this.#readiness.wait(() => this.#deps.platform.ensureUser(ctx, userSpec(customer, row)), ctx.now.getTime());
  }

  /** Removes the user from the platform, then its record; true once both are gone. */
  async #undo(ctx: PlatformContext, customer: UserCustomer, row: UserRow): Promise<boolean> {
    const progress = await this.#deps.platform.deleteUser(ctx, userRef(customer, row.username)).catch(() => undefined);
    if (progress?.state !== 'done') {
      await setUserPlatformState(this.#deps.db, row.uid, 'removing', this.#deps.clock.now());
      return false;
    }
    await removeUserByUid(this.#deps.db, row.uid);
    return true;
  }
}

function usernameTaken(customerId: string, username: string): ApiError {
  return new ApiError('ALREADY_EXISTS', `Customer ${customerId} already has a user named ${username}.`, {
    details: { field: 'username', value: username },
  });
}
