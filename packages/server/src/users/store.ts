import type { Selectable } from 'kysely';
import type { Db } from '../infra/db/database.ts';
import type { UsersTable } from '../infra/db/schema.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import { toUser, type User } from './schemas.ts';

export type UserRow = Selectable<UsersTable>;

/** partner-api.md, Limits: at most the first 1,000 users of a customer (by username) are listable. */
export const USERS_LISTABLE = 1000;

export async function insertUser(trx: Db, row: UserRow): Promise<void> {
  await trx.insertInto('users').values(row).execute();
}

export async function findUser(db: Db, customerUid: string, username: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('customer_uid', '=', customerUid).where('username', '=', username).executeTakeFirst();
}

export async function findUserByUid(db: Db, uid: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('uid', '=', uid).executeTakeFirst();
}

export async function removeUser(trx: Db, customerUid: string, username: string): Promise<void> {
  await trx.deleteFrom('users').where('customer_uid', '=', customerUid).where('username', '=', username).execute();
}

export async function setUserRequiredActions(
  trx: Db,
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
  db: Db,
  cursors: CursorCodec,
  customerUid: string,
  query: { limit: number; cursor?: string | undefined },
): Promise<Page<User>> {
  // The 1,000th username bounds the list; without that many users there is no bound.
  const bound = await db
    .selectFrom('users')
    .select('username')
    .where('customer_uid', '=', customerUid)
    .orderBy('username')
    .offset(USERS_LISTABLE - 1)
    .limit(1)
    .executeTakeFirst();
  let select = db
    .selectFrom('users')
    .selectAll()
    .where('customer_uid', '=', customerUid)
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
