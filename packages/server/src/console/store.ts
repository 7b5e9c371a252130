import type { DeleteQueryBuilder, DeleteResult, QueryCreator } from 'kysely';
import type { Database, Db } from '../app/database.ts';

/** Inserts a one-time login link (only its hash). */
export async function insertLogin(
  db: Db,
  row: {
    token_hash: string;
    partner_id: string;
    mode: 'live' | 'test';
    customer_uid: string;
    user_uid: string;
    expires_at: Date;
    created_at: Date;
  },
): Promise<void> {
  await db
    .insertInto('console_logins')
    .values({ ...row, used_at: null })
    .execute();
}

/** Marks an unused, unexpired link used; the link, or undefined when it cannot be used. */
export async function useLogin(trx: Db, tokenHash: string, now: Date) {
  return trx
    .updateTable('console_logins')
    .set({ used_at: now })
    .where('token_hash', '=', tokenHash)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
    .returningAll()
    .executeTakeFirst();
}

export async function insertSession(
  trx: Db,
  row: {
    id_hash: string;
    partner_id: string;
    mode: 'live' | 'test';
    customer_uid: string;
    user_uid: string;
    csrf_token: string;
    expires_at: Date;
    created_at: Date;
  },
): Promise<void> {
  await trx.insertInto('console_sessions').values(row).execute();
}

/** A session while it lasts. Whether its person, customer and partner still allow it is the service's check. */
export async function findSession(db: Db, idHash: string, now: Date) {
  return db.selectFrom('console_sessions').selectAll().where('id_hash', '=', idHash).where('expires_at', '>', now).executeTakeFirst();
}

/** Ends every link and session of one person or one partner (a customer's: `customerConsoleRevocation`). */
export async function revokeConsoleAccess(trx: Db, who: { userUid: string } | { partnerId: string }): Promise<number> {
  const [column, value] = 'userUid' in who ? (['user_uid', who.userUid] as const) : (['partner_id', who.partnerId] as const);
  await trx.deleteFrom('console_logins').where(column, '=', value).execute();
  const ended = await trx.deleteFrom('console_sessions').where(column, '=', value).executeTakeFirst();
  return Number(ended.numDeletedRows);
}

/**
 * One customer's console access ended as two deletes (its login links, its sessions) for the transaction of
 * the caller's that suspends or deletes the customer.
 */
export function customerConsoleRevocation(
  qc: QueryCreator<Database>,
  customerUid: string,
): readonly [DeleteQueryBuilder<Database, 'console_logins', DeleteResult>, DeleteQueryBuilder<Database, 'console_sessions', DeleteResult>] {
  return [
    qc.deleteFrom('console_logins').where('customer_uid', '=', customerUid),
    qc.deleteFrom('console_sessions').where('customer_uid', '=', customerUid),
  ];
}

export async function deleteExpiredConsoleAccess(db: Db, now: Date): Promise<void> {
  await db.deleteFrom('console_logins').where('expires_at', '<', now).execute();
  await db.deleteFrom('console_sessions').where('expires_at', '<', now).execute();
}
