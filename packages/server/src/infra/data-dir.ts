import { chmodSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ConfigError } from './errors/config-error.ts';

/**
 * The data directory (embedded database, operator token, secret key) is
 * owner-only: folders 0700, files 0600. Start-up refuses a directory that other
 * users can read or write, unless asked to repair it (`serve --fix-permissions`).
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

export interface ExposedEntry {
  path: string;
  mode: number;
}

/** Creates the directory (and missing parents) owner-only; an existing one is left as it is. */
export function ensurePrivateDir(path: string): void {
  const created = mkdirSync(path, { recursive: true, mode: PRIVATE_DIR_MODE });
  // mkdir's mode passes through the umask; the directory we just made gets exactly 0700.
  if (created !== undefined) chmodSync(path, PRIVATE_DIR_MODE);
}

/** Writes a file readable and writable by its owner only. `onlyIfAbsent` keeps an existing file. */
export function writePrivateFile(path: string, content: string, options: { onlyIfAbsent?: boolean } = {}): void {
  ensurePrivateDir(join(path, '..'));
  try {
    writeFileSync(path, content, { mode: PRIVATE_FILE_MODE, flag: options.onlyIfAbsent ? 'wx' : 'w' });
  } catch (error) {
    if (options.onlyIfAbsent && (error as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw error;
  }
}

/** Every entry under `dir` (itself included) that gives any permission to group or others. Symlinks are not followed. */
export function findExposed(dir: string): ExposedEntry[] {
  const exposed: ExposedEntry[] = [];
  const pending = [dir];
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (!stat || stat.isSymbolicLink()) continue;
    if ((stat.mode & 0o077) !== 0) exposed.push({ path, mode: stat.mode & 0o777 });
    if (stat.isDirectory()) for (const name of readdirSync(path)) pending.push(join(path, name));
  }
  return exposed;
}

/** Makes every entry under `dir` owner-only; returns how many were changed. */
export function makeOwnerOnly(dir: string): number {
  let changed = 0;
  for (const entry of findExposed(dir)) {
    const isDir = lstatSync(entry.path).isDirectory();
    // Files keep their owner bits and lose everything else.
    chmodSync(entry.path, isDir ? PRIVATE_DIR_MODE : entry.mode & 0o700);
    changed++;
  }
  return changed;
}

/**
 * Creates the data directory owner-only, or checks an existing one: any entry that other users
 * can read, write or enter stops start-up with one line, unless `fix` repairs the modes.
 */
export function prepareDataDir(dir: string, options: { fix: boolean }): { repaired: number } {
  ensurePrivateDir(dir);
  const owner = lstatSync(dir).uid;
  if (typeof process.getuid === 'function' && owner !== process.getuid()) {
    throw new ConfigError(
      'TENANTRY_DATA_DIR',
      `${dir} belongs to another user (uid ${owner}); run as its owner or choose another directory`,
    );
  }
  const exposed = findExposed(dir);
  if (exposed.length === 0) return { repaired: 0 };
  if (options.fix) return { repaired: makeOwnerOnly(dir) };
  const first = exposed[0] as ExposedEntry;
  const name = relative(dir, first.path) || '.';
  const more = exposed.length > 1 ? ` and ${exposed.length - 1} more` : '';
  throw new ConfigError(
    'TENANTRY_DATA_DIR',
    `${dir} is open to other users (${name} has mode ${first.mode.toString(8).padStart(4, '0')}${more}); ` +
      'make it owner-only with `tenantry serve --fix-permissions` or `chmod -R go-rwx` on it',
  );
}
