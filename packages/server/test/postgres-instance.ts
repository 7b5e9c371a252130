import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A PostgreSQL server of a test's own: initialised in a temporary folder, listening on a free port of
 * 127.0.0.1, with trust authentication. Unlike the machine's shared server, a test may stop it,
 * restart it fast or immediately (a crash: no shutdown checkpoint), remove it, and add a streaming
 * standby to promote. The server programs come from `pg_config --bindir`; PostgreSQL refuses to run as
 * root, so under root they run as the `postgres` user.
 */
export interface PostgresInstance {
  readonly port: number;
  readonly dataDir: string;
  /** A URL for `database` (default `postgres`) on this instance. */
  url(database?: string): string;
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  restart(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Stops it (immediately) and deletes its folder. */
  remove(): Promise<void>;
  /** The server's log, for a failing test's message. */
  log(): string;
}

export interface Standby extends PostgresInstance {
  /** Ends recovery: the standby accepts writes from now on. */
  promote(): Promise<void>;
}

/**
 * Where PostgreSQL's server programs are, or why a test cannot have its own server here; `also` names
 * more programs of the same folder the test runs (`pg_dump`, `pg_restore`).
 */
export function postgresPrograms(also: readonly string[] = []): { bindir: string } | { missing: string } {
  let bindir: string;
  try {
    bindir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
  } catch {
    return { missing: 'pg_config is not on the PATH (install PostgreSQL server programs)' };
  }
  for (const program of ['initdb', 'pg_ctl', 'postgres', 'pg_basebackup', ...also]) {
    if (!existsSync(join(bindir, program))) return { missing: `${program} is not in ${bindir}` };
  }
  if (process.getuid?.() === 0 && spawnSync('id', ['-u', 'postgres']).status !== 0) {
    return { missing: 'running as root, and there is no postgres user to run the server as' };
  }
  return { bindir };
}

/** The reason to skip a test that needs its own PostgreSQL server (and the programs `also` names), or false when it can run. */
export function skipWithoutPostgresPrograms(also: readonly string[] = []): string | false {
  const programs = postgresPrograms(also);
  return 'missing' in programs ? `no PostgreSQL server programs: ${programs.missing}` : false;
}

function bindir(): string {
  const programs = postgresPrograms();
  if ('missing' in programs) throw new Error(programs.missing);
  return programs.bindir;
}

const asRoot = () => process.getuid?.() === 0;

/**
 * Runs one of PostgreSQL's programs (`pg_dump`, `pg_restore`, ...) from the server's folder, as the
 * `postgres` user when this process is root; answers its standard output, throws with its output when it fails.
 */
export function runProgram(program: string, args: string[]): string {
  const path = join(bindir(), program);
  const [command, argv] = asRoot() ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
  const result = spawnSync(command, argv, { encoding: 'utf8', cwd: tmpdir() });
  if (result.status !== 0) {
    throw new Error(`${program} ${args.join(' ')} failed (${result.status}): ${result.stdout}${result.stderr}`);
  }
  return result.stdout;
}

function ownFolder(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o700);
  if (asRoot()) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
    chownSync(dir, uid, gid);
  }
  return dir;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function instance(root: string, port: number): PostgresInstance {
  const dataDir = join(root, 'data');
  const logFile = join(root, 'server.log');
  const ctl = (...args: string[]) => runProgram('pg_ctl', ['-D', dataDir, '-l', logFile, '-w', '-t', '60', ...args]);
  const self: PostgresInstance = {
    port,
    dataDir,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    start: async () => {
      ctl('start');
    },
    stop: async (mode = 'fast') => {
      ctl('stop', '-m', mode);
    },
    restart: async (mode = 'fast') => {
      await self.stop(mode);
      await self.start();
    },
    remove: async () => {
      try {
        ctl('stop', '-m', 'immediate');
      } catch {
        // Already stopped.
      }
      rmSync(root, { recursive: true, force: true });
    },
    log: () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''),
  };
  return self;
}

/** Settings appended to the instance's configuration (the last of a name wins). */
function configure(dataDir: string, settings: Record<string, string>): void {
  const lines = Object.entries(settings).map(([name, value]) => `${name} = ${value}`);
  appendFileSync(join(dataDir, 'postgresql.auto.conf'), `${lines.join('\n')}\n`);
}

/** Its own port and socket folder, so that nothing is shared with the machine's server. */
const listening = (dataDir: string, port: number) => ({
  port: String(port),
  listen_addresses: "'127.0.0.1'",
  unix_socket_directories: `'${dataDir}'`,
});

/**
 * Starts a new instance. `settings` go to its configuration as written (quote strings:
 * `{ shared_preload_libraries: "'pg_stat_statements'" }`); they outlive restarts.
 */
export async function startPostgres(settings: Record<string, string> = {}): Promise<PostgresInstance> {
  const root = ownFolder('tenantry-pg-');
  const port = await freePort();
  const server = instance(root, port);
  runProgram('initdb', ['-D', server.dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  configure(server.dataDir, { ...listening(server.dataDir, port), max_connections: '200', ...settings });
  await server.start();
  return server;
}

/**
 * A streaming standby of `primary`, copied by `pg_basebackup -R` and started on a port of its own.
 * `synchronous` makes the primary wait for it at every commit (`synchronous_standby_names`), so a write
 * the primary acknowledged is on the standby when it is promoted.
 */
export async function addStandby(primary: PostgresInstance, options: { synchronous?: boolean } = {}): Promise<Standby> {
  const root = ownFolder('tenantry-pg-standby-');
  const port = await freePort();
  const server = instance(root, port);
  const name = `standby_${port}`;
  runProgram('pg_basebackup', [
    '-h',
    '127.0.0.1',
    '-p',
    String(primary.port),
    '-U',
    'postgres',
    '-D',
    server.dataDir,
    '-R',
    '-X',
    'stream',
  ]);
  configure(server.dataDir, {
    ...listening(server.dataDir, port),
    primary_conninfo: `'host=127.0.0.1 port=${primary.port} user=postgres application_name=${name}'`,
  });
  await server.start();
  if (options.synchronous) {
    configure(primary.dataDir, { synchronous_standby_names: `'${name}'` });
    runProgram('pg_ctl', ['-D', primary.dataDir, 'reload']);
  }
  return {
    ...server,
    promote: async () => {
      runProgram('pg_ctl', ['-D', server.dataDir, '-w', 'promote']);
    },
  };
}

/**
 * A new instance restored from a physical backup of `primary` taken while it runs: `pg_basebackup` with
 * the write-ahead log streamed beside the copy (so the copy is consistent on its own), checked by
 * `pg_verifybackup`, then started on a port of its own as a server of its own (no standby settings: it
 * recovers to the end of the backup and accepts writes).
 */
export async function startFromBaseBackup(primary: PostgresInstance): Promise<PostgresInstance> {
  const root = ownFolder('tenantry-pg-restored-');
  const port = await freePort();
  const server = instance(root, port);
  runProgram('pg_basebackup', [
    '-h',
    '127.0.0.1',
    '-p',
    String(primary.port),
    '-U',
    'postgres',
    '-D',
    server.dataDir,
    '-X',
    'stream',
    '-c',
    'fast',
  ]);
  runProgram('pg_verifybackup', [server.dataDir]);
  configure(server.dataDir, listening(server.dataDir, port));
  await server.start();
  return server;
}
