import type { Db } from '../infra/db/handle.ts';
import type { ConsoleTables } from './tables.ts';

/** Inserts a one-time login link (only its hash). */
export async function insertLogin(
  db: Db<ConsoleTables>,
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
export async function useLogin(trx: Db<ConsoleTables>, tokenHash: string, now: Date) {
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
  trx: Db<ConsoleTables>,
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
export async function findSession(db: Db<ConsoleTables>, idHash: string, now: Date) {
  return db.selectFrom('console_sessions').selectAll().where('id_hash', '=', idHash).where('expires_at', '>', now).executeTakeFirst();
}

/** Ends one session (its person signed out). */
export async function deleteSession(db: Db<ConsoleTables>, idHash: string): Promise<void> {
  await db.deleteFrom('console_sessions').where('id_hash', '=', idHash).execute();
}

/** Ends every link and session of one person, one customer or one partner. */
export async function revokeConsoleAccess(
  trx: Db<ConsoleTables>,
  who: { userUid: string } | { customerUid: string } | { partnerId: string },
): Promise<number> {
  const [column, value] =
    'userUid' in who
      ? (['user_uid', who.userUid] as const)
      : 'customerUid' in who
        ? (['customer_uid', who.customerUid] as const)
        : (['partner_id', who.partnerId] as const);
  await trx.deleteFrom('console_logins').where(column, '=', value).execute();
  const ended = await trx.deleteFrom('console_sessions').where(column, '=', value).executeTakeFirst();
  return Number(ended.numDeletedRows);
}

export async function deleteExpiredConsoleAccess(db: Db<ConsoleTables>, now: Date): Promise<void> {
  await db.deleteFrom('console_logins').where('expires_at', '<', now).execute();
  await db.deleteFrom('console_sessions').where('expires_at', '<', now).execute();
}
