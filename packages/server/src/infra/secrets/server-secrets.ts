import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { ConfigError } from '../errors/config-error.ts';
import { isSealed, type SecretBox, SecretKeyError, type SecretKeyOrigin, sealedKeyId } from './secret-box.ts';
import type { SecretTables } from './tables.ts';

/** This module's own tables: infrastructure knows no domain module's. */
type Db = Kysely<SecretTables>;

/**
 * Secrets every process of one deployment must share (token signing, cursor
 * encryption). The first process to start creates them; the others read them.
 * They are stored sealed (secret-box.ts): the database alone does not give them.
 */
export interface ServerSecrets {
  tokenSigningKey: Buffer;
  cursorKey: Buffer;
}

/** `origin`: where the keys came from, named when they do not open what the database holds. */
export async function loadServerSecrets(db: Db, box: SecretBox, origin?: SecretKeyOrigin): Promise<ServerSecrets> {
  const from = origin ?? { variable: 'TENANTRY_SECRET_KEY', from: 'TENANTRY_SECRET_KEY' };
  return {
    tokenSigningKey: await getOrCreate(db, box, 'token_signing_key', from),
    // A new name: the former cursor key was stored in plain text, and cursors are now encrypted.
    cursorKey: await getOrCreate(db, box, 'cursor_key', from),
  };
}

/**
 * The id of the key the database's secrets are sealed with, or undefined when nothing is sealed: a new
 * database, or one from before secrets were sealed (its plain-text secrets are replaced at start).
 */
export async function sealedWithKey(db: Db): Promise<string | undefined> {
  const rows = await db.selectFrom('server_secrets').select('value').execute();
  return rows.map((row) => sealedKeyId(row.value)).find((id) => id !== undefined);
}

async function getOrCreate(db: Db, box: SecretBox, name: string, origin: SecretKeyOrigin): Promise<Buffer> {
  const context = `server_secrets:${name}`;
  await db
    .insertInto('server_secrets')
    .values({ name, value: box.seal(randomBytes(32), context) })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  let stored = await read(db, name);
  if (!isSealed(stored)) {
    // Written in plain text by an earlier version: anyone with a copy of the database has it, so it
    // is replaced rather than sealed (tokens and cursors it signed stop working; partners exchange again).
    await db
      .updateTable('server_secrets')
      .set({ value: box.seal(randomBytes(32), context) })
      .where('name', '=', name)
      .where('value', '=', stored)
      .execute();
    stored = await read(db, name);
  }
  let key: Buffer;
  try {
    key = box.open(stored, context);
  } catch (error) {
    if (error instanceof SecretKeyError) {
      throw new ConfigError(
        origin.variable,
        `the database's ${name} is ${error.message}, read from ${origin.from}; every process sharing a database needs the same secret key`,
      );
    }
    throw error;
  }
  // Sealed with an older key during a rotation: seal it again with the active one.
  if (box.isStale(stored)) {
    await db
      .updateTable('server_secrets')
      .set({ value: box.seal(key, context) })
      .where('name', '=', name)
      .where('value', '=', stored)
      .execute();
  }
  return key;
}

async function read(db: Db, name: string): Promise<string> {
  const row = await db.selectFrom('server_secrets').select('value').where('name', '=', name).executeTakeFirstOrThrow();
  return row.value;
}
