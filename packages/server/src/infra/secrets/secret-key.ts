import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writePrivateFile } from '../data-dir.ts';
import { ConfigError } from '../errors/config-error.ts';
import { SECRET_KEY_BYTES, SecretBox, secretKeyId } from './secret-box.ts';

/**
 * Where the key that seals secrets at rest comes from, first match wins:
 * 1. TENANTRY_SECRET_KEY: keys separated by commas, the active one first;
 * 2. TENANTRY_SECRET_KEY_FILE: a file (a mounted Secret) with one key per line, the active one first;
 * 3. `<data dir>/secret-key`, created owner-only on first start: the embedded default.
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
}

export function loadSecretKeys(settings: SecretKeySettings): LoadedSecretKeys {
  if (settings.secretKey !== undefined) {
    return { box: new SecretBox(parseSecretKeys(settings.secretKey, 'TENANTRY_SECRET_KEY')), source: 'TENANTRY_SECRET_KEY' };
  }
  if (settings.secretKeyFile !== undefined) {
    const text = readKeyFile(settings.secretKeyFile, 'TENANTRY_SECRET_KEY_FILE');
    return { box: new SecretBox(parseSecretKeys(text, 'TENANTRY_SECRET_KEY_FILE')), source: 'TENANTRY_SECRET_KEY_FILE' };
  }
  const path = join(settings.dataDir, DATA_DIR_KEY_FILE);
  writePrivateFile(path, `${generateSecretKey()}\n`, { onlyIfAbsent: true });
  return { box: new SecretBox(parseSecretKeys(readKeyFile(path, 'TENANTRY_DATA_DIR'), 'TENANTRY_DATA_DIR')), source: 'data directory' };
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

function readKeyFile(path: string, variable: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(variable, `the secret key file ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}
