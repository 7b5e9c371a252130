import { lstatSync, mkdirSync } from 'node:fs';
import { enableCompileCache } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Node's on-disk compile cache for the CLI's modules: a command (and `tenantry serve`) starts about
 * 0.3 s sooner once the modules were compiled once (decision 199). The cache lives in the user's own
 * cache directory (`$XDG_CACHE_HOME/tenantry`, else `~/.cache/tenantry`), never in a shared temporary
 * folder another local user could write to: it is used only when that directory is this user's and
 * nobody else can write to it. NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
export function useCompileCache(env: NodeJS.ProcessEnv = process.env): string | undefined {
  try {
    const base = env.XDG_CACHE_HOME || join(homedir(), '.cache');
    const dir = join(base, 'tenantry', 'node-compile-cache');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const stat = lstatSync(dir);
    const mine = typeof process.getuid !== 'function' || stat.uid === process.getuid();
    if (!stat.isDirectory() || !mine || (stat.mode & 0o022) !== 0) return undefined;
    const result = enableCompileCache(dir);
    return result.directory;
  } catch {
    // A read-only home or an unusual file system: start without the cache.
    return undefined;
  }
}
