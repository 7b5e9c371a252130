import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Kysely } from 'kysely';
import { writePrivateFile } from '../data-dir.ts';
import { ConfigError } from '../errors/config-error.ts';
import { SECRET_KEY_BYTES, SecretBox, type SecretKeyOrigin, secretKeyId } from './secret-box.ts';
import { sealedWithKey } from './server-secrets.ts';
import type { SecretTables } from './tables.ts';

/**
 * Where the key that seals secrets at rest comes from, first match wins:
 * 1. TENANTRY_SECRET_KEY: keys separated by commas, the active one first;
 * 2. TENANTRY_SECRET_KEY_FILE: a file (a mounted Secret) with one key per line, the active one first;
 * 3. `<data dir>/secret-key`, created owner-only on the first start of a database that has sealed nothing yet:
 *    the embedded default.
 * A key is 32 bytes written as 64 hexadecimal characters (`openssl rand -hex 32`).
 * Several processes on one PostgreSQL database need the same key: use 1 or 2 there.
 */
export interface SecretKeySettings {
  secretKey: string | undefined;
  secretKeyFile: string | undefined;
  dataDir: string;
}

export const DATA_DIR_KEY_FILE = 'secret-key';

export interface LoadedSecretKeys {
  box: SecretBox;
  /** Where the keys came from, for the start-up log line and error messages. */
  source: 'TENANTRY_SECRET_KEY' | 'TENANTRY_SECRET_KEY_FILE' | 'data directory';
  origin: SecretKeyOrigin;
}

/**
 * The configured keys, or undefined when the data directory holds no key file yet: whether one may be
 * made depends on the database (`createDataDirKey`, once it is open).
 */
export function loadSecretKeys(settings: SecretKeySettings): LoadedSecretKeys | undefined {
  if (settings.secretKey !== undefined) {
    const origin = { variable: 'TENANTRY_SECRET_KEY', from: 'TENANTRY_SECRET_KEY' } as const;
    return { box: new SecretBox(parseSecretKeys(settings.secretKey, origin.variable)), source: origin.variable, origin };
  }
  if (settings.secretKeyFile !== undefined) {
    const origin = { variable: 'TENANTRY_SECRET_KEY_FILE', from: settings.secretKeyFile } as const;
    const text = readKeyFile(settings.secretKeyFile, origin.variable);
    return { box: new SecretBox(parseSecretKeys(text, origin.variable)), source: origin.variable, origin };
  }
  const path = join(settings.dataDir, DATA_DIR_KEY_FILE);
  const text = readKeyFile(path, 'TENANTRY_DATA_DIR', { absent: 'undefined' });
  return text === undefined ? undefined : dataDirKeys(path, text);
}

/**
 * The data directory's first key, written only for a database that holds nothing sealed: next to sealed
 * secrets a new key would open none of them, and would stay on disk looking like the right one.
 */
export async function createDataDirKey(db: Kysely<SecretTables>, dataDir: string): Promise<LoadedSecretKeys> {
  const path = join(dataDir, DATA_DIR_KEY_FILE);
  const keyId = await sealedWithKey(db);
  if (keyId !== undefined) {
    throw new ConfigError(
      'TENANTRY_DATA_DIR',
      `the secret key file ${path} is missing, but the database holds secrets sealed with secret key ${keyId}; restore that file (or give its key in TENANTRY_SECRET_KEY): a new key would open none of them`,
    );
  }
  writePrivateFile(path, `${generateSecretKey()}\n`, { onlyIfAbsent: true });
  return dataDirKeys(path, readKeyFile(path, 'TENANTRY_DATA_DIR'));
}

function dataDirKeys(path: string, text: string): LoadedSecretKeys {
  const origin = { variable: 'TENANTRY_DATA_DIR', from: path } as const;
  return { box: new SecretBox(parseSecretKeys(text, origin.variable)), source: 'data directory', origin };
}

/** A new random key, as the configuration takes it. */
export function generateSecretKey(): string {
  return randomBytes(SECRET_KEY_BYTES).toString('hex');
}

/** Keys separated by commas or lines; blank lines and `#` comments are ignored. */
export function parseSecretKeys(text: string, variable: string): Buffer[] {
  const entries = text
    .split(/[\n,]/)
    .map((line) => line.replace(/#.*$/, '').trim())
    .filter(Boolean);
  if (entries.length === 0) throw new ConfigError(variable, 'holds no secret key (generate one with: openssl rand -hex 32)');
  return entries.map((entry, index) => {
    if (!/^[0-9a-fA-F]{64}$/.test(entry)) {
      throw new ConfigError(variable, `key ${index + 1} must be 64 hexadecimal characters (32 bytes; openssl rand -hex 32)`);
    }
    return Buffer.from(entry, 'hex');
  });
}

/**
 * Starts a rotation of the data directory's key file: a new active key on the first line, the
 * previous keys after it. The next start seals every secret with the new key; the old lines can
 * then be removed. Returns the new key's id and the ids kept for opening.
 */
export function rotateDataDirKey(dataDir: string): { activeKeyId: string; previousKeyIds: string[] } {
  const path = join(dataDir, DATA_DIR_KEY_FILE);
  const previous = parseSecretKeys(readKeyFile(path, 'TENANTRY_DATA_DIR'), 'TENANTRY_DATA_DIR');
  const next = generateSecretKey();
  const lines = [next, ...previous.map((key) => key.toString('hex'))];
  writeFileSync(path, `${lines.join('\n')}\n`, { mode: 0o600 });
  return { activeKeyId: secretKeyId(Buffer.from(next, 'hex')), previousKeyIds: previous.map(secretKeyId) };
}

function readKeyFile(path: string, variable: string): string;
function readKeyFile(path: string, variable: string, options: { absent: 'undefined' }): string | undefined;
function readKeyFile(path: string, variable: string, options: { absent?: 'undefined' } = {}): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && options.absent === 'undefined') return undefined;
    throw new ConfigError(variable, `the secret key file ${path} cannot be read (${code ?? 'error'})`);
  }
}
