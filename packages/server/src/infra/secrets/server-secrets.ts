import { randomBytes } from 'node:crypto';
import type { Db } from '../db/database.ts';

/**
 * Secrets every process of one deployment must share (token signing, cursor
 * signing). The first process to start creates them; the others read them.
 */
export interface ServerSecrets {
  tokenSigningKey: Buffer;
  cursorSigningKey: Buffer;
}

export async function loadServerSecrets(db: Db): Promise<ServerSecrets> {
  return {
    tokenSigningKey: await getOrCreate(db, 'token_signing_key'),
    cursorSigningKey: await getOrCreate(db, 'cursor_signing_key'),
  };
}

async function getOrCreate(db: Db, name: string): Promise<Buffer> {
  await db
    .insertInto('server_secrets')
    .values({ name, value: randomBytes(32).toString('hex') })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const row = await db.selectFrom('server_secrets').select('value').where('name', '=', name).executeTakeFirstOrThrow();
  return Buffer.from(row.value, 'hex');
}
