import { requireActiveCustomer } from '../customers/lifecycle.ts';
import type { CustomerService } from '../customers/service.ts';
import { lockCustomer } from '../customers/store.ts';
import { type Db, uniqueViolation } from '../infra/db/database.ts';
import { ApiError, notFound } from '../infra/errors/catalogue.ts';
import { newId } from '../infra/ids.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import type { Platform } from '../platform/platform.ts';
import { platformContext, type Tenant } from '../platform/tenant.ts';
import { type CreateUserRequest, toUser, type User } from './schemas.ts';
import { findUser, findUserByUid, insertUser, listUsers, removeUser, type UserRow } from './store.ts';

export interface UserServiceDeps {
  db: Db;
  cursors: CursorCodec;
  platform: Platform;
  customers: CustomerService;
  /** Called in the transaction that removes a user: whatever was granted to that person ends with it. */
  onUserRemoved: (trx: Db, userUid: string) => Promise<void>;
}

/** A customer's users (CONTRACT §4): created in the platform's identity provider at once (201). */
export class UserService {
  readonly #deps: UserServiceDeps;

  constructor(deps: UserServiceDeps) {
    this.#deps = deps;
  }

  async create(tenant: Tenant, customerId: string, request: CreateUserRequest): Promise<User> {
    const { db, platform } = this.#deps;
    try {
      return await db.transaction().execute(async (trx) => {
        const customer = await lockCustomer(trx, tenant, customerId);
        if (!customer) throw notFound(`Customer ${customerId}`);
        requireActiveCustomer(customer, 'add users');
        if (await findUser(trx, customer.uid, request.username)) throw usernameTaken(customerId, request.username);
        const row: UserRow = {
          uid: newId('user'),
          customer_uid: customer.uid,
          platform_scope: tenant.scope,
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
        };
        await insertUser(trx, row);
        await platform.createUser(platformContext(trx, tenant), {
          customerId,
          username: row.username,
          email: row.email,
          role: row.role,
          firstName: row.first_name,
          lastName: row.last_name,
        });
        return toUser(row);
      });
    } catch (error) {
      const constraint = uniqueViolation(error);
      if (constraint === 'users_scope_email_key') {
        throw new ApiError('ALREADY_EXISTS', `The email ${request.email} is already taken by another user.`, {
          details: { field: 'email', value: request.email },
        });
      }
      if (constraint !== undefined) throw usernameTaken(customerId, request.username);
      throw error;
    }
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
    return listUsers(this.#deps.db, this.#deps.cursors, customer.uid, query);
  }

  /** Removes a user; the owner admin cannot be removed (403 FORBIDDEN). */
  async delete(tenant: Tenant, customerId: string, username: string): Promise<{ username: string; deleted: true }> {
    const { db, platform } = this.#deps;
    return db.transaction().execute(async (trx) => {
      const customer = await lockCustomer(trx, tenant, customerId);
      if (!customer) throw notFound(`Customer ${customerId}`);
      const user = await findUser(trx, customer.uid, username);
      if (!user) throw notFound(`User ${username} of customer ${customerId}`);
      if (user.is_owner) {
        throw new ApiError('FORBIDDEN', `${username} is the owner admin of customer ${customerId} and cannot be deleted.`, {
          details: { customer_id: customerId, username, is_owner: true },
        });
      }
      if (customer.status === 'deleting') {
        throw new ApiError('CONFLICT', `Customer ${customerId} is being deleted; its users go with it.`, {
          details: { customer_id: customerId, status: customer.status },
        });
      }
      await removeUser(trx, customer.uid, username);
      await this.#deps.onUserRemoved(trx, user.uid);
      await platform.deleteUser(platformContext(trx, tenant), { customerId, username });
      return { username, deleted: true as const };
    });
  }
}

function usernameTaken(customerId: string, username: string): ApiError {
  return new ApiError('ALREADY_EXISTS', `Customer ${customerId} already has a user named ${username}.`, {
    details: { field: 'username', value: username },
  });
}
