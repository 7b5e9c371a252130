import { execFile } from 'node:child_process';
import { existsSync, lstatSync } from 'node:fs';
import { getCompileCacheDir } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** What the child that made a new embedded database did: the migrations it applied, or its error. */
export type MadeApart = { applied: string[] } | { error: string };

/**
 * A new embedded database is made in a process of its own: initdb and the migrations
 * grow the memory of the process that runs them by 40-60 MB that it never gives back (PGlite's
 * WebAssembly heap, the C library's), so a server that makes its database itself idles at 230-252 MB
 * after its first start and 180-194 MB after every later one. The child creates the database in
 * `<dataDir>/db`, applies every migration and exits; the server then opens a database with nothing
 * left to do, as on a restart. Started as early as the data directory is known, so that the child
 * works while the server loads its modules.
 *
 * Undefined (nothing to do here; the server opens the database itself) when the database
 * exists, or when the data directory exists but is not plainly this user's alone: the server's own
 * checks then answer, before anything is written in it.
 */
export function makeNewEmbeddedDatabaseApart(dataDir: string): Promise<MadeApart> | undefined {
  const databaseDir = join(dataDir, 'db');
  if (existsSync(join(databaseDir, 'PG_VERSION'))) return undefined;
  for (const dir of [dataDir, databaseDir]) {
    if (!existsSync(dir)) continue;
    const stat = lstatSync(dir);
    if (!stat.isDirectory() || (stat.mode & 0o077) !== 0 || stat.uid !== process.getuid?.()) return undefined;
  }
  return (
    promisify(execFile)(process.execPath, [fileURLToPath(import.meta.url), databaseDir], {
      // The server's own Node options (a profiler, an --import hook) are not the helper's; its compile
      // cache is (the modules load without the type stripper).
      env: { ...process.env, NODE_OPTIONS: '', ...(getCompileCacheDir() ? { NODE_COMPILE_CACHE: getCompileCacheDir() } : {}) },
      timeout: 120_000,
    })
      // An answer that is not the list (the child did not run as one) is a failure like any other.
      .then(({ stdout }): MadeApart => ({ applied: JSON.parse(stdout) as string[] }))
      .catch((error: { stderr?: unknown; message: string }) => ({
        error: typeof error.stderr === 'string' && error.stderr.trim() ? (error.stderr.trim().split('\n').at(-1) ?? '') : error.message,
      }))
  );
}

/** The child: `node new-embedded-database.ts <database dir>` prints the migrations it applied as JSON. */
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const databaseDir = process.argv[2];
  if (!databaseDir) throw new Error('usage: new-embedded-database.ts <database directory>');
  process.umask(0o077);
  const { migrate, openAppDatabase } = await import('./database.ts');
  const database = await openAppDatabase({ kind: 'embedded', dataDir: databaseDir });
  try {
    process.stdout.write(JSON.stringify(await migrate(database.db)));
  } finally {
    await database.close();
  }
}
