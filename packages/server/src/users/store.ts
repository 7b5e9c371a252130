import { type Expression, expressionBuilder, type QueryCreator } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import { precompile } from '../infra/db/precompiled.ts';
import type { Page, ScopedCursors } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import { toUser, type User } from './schemas.ts';
import type { UserPlatformState, UserRow, UserTables } from './tables.ts';

export type { UserRow } from './tables.ts';

/** partner-api.md, Limits: at most the first 1,000 users of a customer (by username) are listable. */
export const USERS_LISTABLE = 1000;

export async function insertUser(trx: Db<UserTables>, row: UserRow): Promise<void> {
  await userInsert(trx, row).execute();
}

/** Users' insert: one alone, or a batch of customers' owners. */
export function userInsert(qc: QueryCreator<UserTables>, rows: UserRow | readonly UserRow[]) {
  return qc.insertInto('users').values(rows);
}

/** A user of a customer by username (one being removed is already gone). */
export async function findUser(db: Db<UserTables>, customerUid: string, username: string): Promise<UserRow | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where('customer_uid', '=', customerUid)
    .where('username', '=', username)
    .where('platform_state', '<>', 'removing')
    .executeTakeFirst();
}

/** What the platform needs of a user (`UserSpec`). */
const USER_FOR_PLATFORM = ['username', 'email', 'role', 'is_owner', 'first_name', 'last_name'] as const;
export type UserForPlatform = Pick<UserRow, (typeof USER_FOR_PLATFORM)[number]>;

/**
 * The customer's owner as the platform needs it, as a subquery another module's statement embeds (a
 * creation's look reads its customer, quota, owner and project in one round trip).
 */
export function ownerForPlatformOf(customerUid: Expression<string> | string) {
  return expressionBuilder<UserTables, never>()
    .selectFrom('users')
    .select(USER_FOR_PLATFORM)
    .where('customer_uid', '=', customerUid)
    .where('is_owner', '=', true);
}

/** Moves a user's platform state (pending → ready, * → removing). */
export async function setUserPlatformState(db: Db<UserTables>, uid: string, state: UserPlatformState, at: Date): Promise<void> {
  await db.updateTable('users').set({ platform_state: state, platform_state_at: at }).where('uid', '=', uid).execute();
}

/**
 * The owner made on the platform with its customer (nothing done when it already was): written by
 * every successful creation's commit, so compiled once.
 */
export const setOwnerReady = precompile((trx: Db<UserTables>, a: { customerUid: string; at: Date }) =>
  trx
    .updateTable('users')
    .set({ platform_state: 'ready', platform_state_at: a.at })
    .where('customer_uid', '=', a.customerUid)
    .where('is_owner', '=', true)
    .where('platform_state', '<>', 'ready'),
);

/** Users a request left half-made or half-removed before `before` (not owners: their customer's operation settles them). */
export async function usersToReconcile(db: Db<UserTables>, before: Date, limit: number): Promise<UserRow[]> {
  return db
    .selectFrom('users')
    .selectAll()
    .where('platform_state', '<>', 'ready')
    .where('platform_state_at', '<', before)
    .where('is_owner', '=', false)
    .orderBy('platform_state_at')
    .limit(limit)
    .execute();
}

export async function removeUserByUid(db: Db<UserTables>, uid: string): Promise<void> {
  await db.deleteFrom('users').where('uid', '=', uid).execute();
}

export async function findUserByUid(db: Db<UserTables>, uid: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('uid', '=', uid).executeTakeFirst();
}

export async function setUserRequiredActions(
  trx: Db<UserTables>,
  customerUid: string,
  username: string,
  actions: string[],
): Promise<UserRow | undefined> {
  return trx
    .updateTable('users')
    .set({ required_actions: actions })
    .where('customer_uid', '=', customerUid)
    .where('username', '=', username)
    .returningAll()
    .executeTakeFirst();
}

/** Users by username, owner included, up to the 1,000th. */
export async function listUsers(
  db: Db<UserTables>,
  cursors: ScopedCursors,
  customerUid: string,
  query: { limit: number; cursor?: string | undefined },
): Promise<Page<User>> {
  // The 1,000th username bounds the list; without that many users there is no bound.
  const bound = await db
    .selectFrom('users')
    .select('username')
    .where('customer_uid', '=', customerUid)
    .where('platform_state', '<>', 'removing')
    .orderBy('username')
    .offset(USERS_LISTABLE - 1)
    .limit(1)
    .executeTakeFirst();
  let select = db
    .selectFrom('users')
    .selectAll()
    .where('customer_uid', '=', customerUid)
    .where('platform_state', '<>', 'removing')
    .orderBy('username')
    .limit(query.limit + 1);
  if (bound) select = select.where('username', '<=', bound.username);
  if (query.cursor !== undefined) {
    const [last] = cursors.decode(query.cursor, 'customer-users', { customer: customerUid });
    select = select.where('username', '>', String(last));
  }
  const rows = await select.execute();
  return toPage(rows, query.limit, toUser, (last) => cursors.encode('customer-users', { customer: customerUid }, [last.username]));
}
