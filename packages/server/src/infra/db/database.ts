import { dirname } from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { parseIntoClientConfig } from 'pg-connection-string';
import { ensurePrivateDir, makeOwnerOnly } from '../data-dir.ts';
import { acquireEmbeddedLock } from './embedded-lock.ts';
import { isChangedShape, prepareStatements, STATEMENT_CACHE_DEFAULT } from './named-statements.ts';
import type { PGlitePool } from './pglite-pool.ts';
import { runPrecompiledOnPool } from './precompiled.ts';
import { TYPE_PARSERS } from './timestamps.ts';
import { trackTransactions } from './transactions.ts';

export interface DatabaseHandle<DB = unknown> {
  db: Kysely<DB>;
  /** true for the embedded PGlite database: one process owns it. */
  embedded: boolean;
  /**
   * Makes the embedded database's files owner-only again. PGlite (PostgreSQL in WASM) writes some
   * files, such as relation cache files rewritten at start and after schema changes, with modes
   * that ignore the umask; the directory stays 0700, and this puts the files right after opening,
   * after migrations, now and then, and on close. A no-op for other databases.
   */
  secureFiles(): void;
  /**
   * The same database through connections whose commits do not wait for the write-ahead log to reach
   * the disk (PostgreSQL's asynchronous commit, `synchronous_commit = off`): for writes
   * that a crash of the database server may forget because whoever made them makes them again (the
   * sandbox platform's objects, which an operation's next look creates again). A commit through the
   * handle itself still waits, and flushes the log up to its own commit record, so whatever such a
   * write did before it is on disk with it. Its own small pool (4 connections, their `application_name`
   * ending in "(asynchronous commit)"), opened on the first call, which checks the setting took: when
   * it did not (PgBouncer refuses `options` it does not track) the answer is the handle itself and
   * `fellBack` says why. The embedded database: the handle itself.
   */
  asynchronousCommit(fellBack?: (reason: string) => void): Promise<Kysely<DB>>;
  /** Borrowers waiting for a connection of the pool now (the sandbox's own pool aside). */
  poolWaiting(): number;
  close(): Promise<void>;
}

export type DatabaseTarget =
  | { kind: 'embedded'; dataDir: string | undefined }
  /**
   * `statementCache`: statements kept prepared per connection (0: none, behind a transaction-mode pooler);
   * `poolSize`: connections opened at most (default 10).
   */
  | { kind: 'postgres'; url: string; statementCache?: number | undefined; poolSize?: number | undefined };

// int8 (counts) as numbers in both drivers; PGlite already does this.
pg.types.setTypeParser(20, (value) => Number(value));

/** Opens the database. The schema type is the composition root's (app/database.ts): infra knows no module's tables. */
export async function openDatabase<DB>(target: DatabaseTarget): Promise<DatabaseHandle<DB>> {
  if (target.kind === 'embedded') {
    // Loaded only for an embedded database: a server on PostgreSQL does not hold PGlite's code (8 MB).
    const { PGlitePool } = await import('./pglite-pool.ts');
    const { dataDir } = target;
    if (dataDir === undefined) return embedded<DB>(await PGlitePool.open(undefined), undefined, () => {});
    // Before anything touches the files: one process per embedded database. The lock file sits beside
    // the database's directory, so a data directory not made yet is made first (owner-only): a new
    // server's child gets here before the server has made it.
    ensurePrivateDir(dirname(dataDir));
    const lock = await acquireEmbeddedLock(dataDir);
    // Files PostgreSQL creates while running (new relations, WAL segments, caches) follow the
    // umask: owner-only in any process that opens an embedded database, not only `tenantry serve`.
    process.umask(0o077);
    try {
      ensurePrivateDir(dataDir);
      const pool = await PGlitePool.open(dataDir);
      const handle = embedded<DB>(pool, dataDir, () => lock.release());
      handle.secureFiles();
      return handle;
    } catch (error) {
      lock.release();
      throw error;
    }
  }
  const statementCache = target.statementCache ?? STATEMENT_CACHE_DEFAULT;
  const pool = serverPool({ connectionString: target.url, max: target.poolSize ?? 10 }, statementCache);
  const db = runPrecompiledOnPool(trackTransactions(new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })), pool);
  let asynchronous: Promise<Kysely<DB>> | undefined;
  return {
    db,
    embedded: false,
    secureFiles: () => {},
    poolWaiting: () => pool.waitingCount,
    asynchronousCommit: (fellBack) => {
      asynchronous ??= openAsynchronousCommit<DB>(target.url, statementCache).then((opened) => {
        if ('reason' in opened) {
          fellBack?.(opened.reason);
          return db;
        }
        return opened.db;
      });
      return asynchronous;
    },
    close: async () => {
      const other = await asynchronous?.catch(() => undefined);
      if (other && other !== db) await other.destroy();
      await db.destroy();
    },
  };
}

function serverPool(connection: pg.PoolConfig, statementCache: number): pg.Pool {
  const pool = new pg.Pool({
    ...connection,
    // `timestamptz` parsed without a regular expression.
    types: TYPE_PARSERS,
    // Fail fast when the server is unreachable: requests answer 503 instead of hanging.
    connectionTimeoutMillis: 2_000,
    idleTimeoutMillis: 30_000,
  });
  // A client losing its connection must not crash the process: idle ones are replaced by the pool
  // ('error' on the pool), and one checked out between two statements of a transaction (background
  // work holds such clients) fails its next query instead ('error' on the client).
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    client.on('error', () => {});
    prepareStatements(client, statementCache);
  });
  return pool;
}

/** What the second pool's sessions add to their `application_name`. */
export const ASYNCHRONOUS_COMMIT = 'asynchronous commit';

/**
 * A pool whose sessions start with `synchronous_commit = off` (the `options` startup parameter, added
 * to any the URL has), checked on its first connection; the reason when the setting did not take.
 * The URL is read by the parser `pg` itself uses (any form the main pool takes, a socket directory in
 * `?host=` included), and the pool is given the result with the options joined.
 */
async function openAsynchronousCommit<DB>(url: string, statementCache: number): Promise<{ db: Kysely<DB> } | { reason: string }> {
  let connection: pg.PoolConfig;
  try {
    const parsed = parseIntoClientConfig(url);
    connection = {
      ...parsed,
      options: [parsed.options, '-c synchronous_commit=off'].filter(Boolean).join(' '),
      // Named apart, so the database's own views (pg_stat_activity) tell these sessions from the others.
      application_name: `${parsed.application_name || 'tenantry'} (${ASYNCHRONOUS_COMMIT})`,
      max: 4,
    };
  } catch (error) {
    return { reason: `the database URL could not be read for a second pool: ${(error as Error).message}` };
  }
  const pool = serverPool(connection, statementCache);
  let setting: string | undefined;
  try {
    const { rows } = await pool.query<{ synchronous_commit: string }>('show synchronous_commit');
    setting = rows[0]?.synchronous_commit;
  } catch (error) {
    await pool.end().catch(() => {});
    return { reason: `its first connection, asking for synchronous_commit=off, failed: ${(error as Error).message}` };
  }
  if (setting !== 'off') {
    await pool.end().catch(() => {});
    return { reason: `the server kept synchronous_commit=${setting} (a pooler ignoring the options startup parameter)` };
  }
  return { db: runPrecompiledOnPool(trackTransactions(new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })), pool) };
}

function embedded<DB>(pool: PGlitePool, dataDir: string | undefined, afterClose: () => void): DatabaseHandle<DB> {
  // biome-ignore lint/suspicious/noExplicitAny: PGlitePool implements the subset of pg.Pool Kysely calls.
  const db = runPrecompiledOnPool(trackTransactions(new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool as any }) })), pool);
  const secureFiles = () => {
    if (dataDir !== undefined) makeOwnerOnly(dataDir);
  };
  return {
    db,
    embedded: true,
    secureFiles,
    // One connection in one process: nothing to gain from a second handle.
    asynchronousCommit: async () => db,
    poolWaiting: () => pool.waitingCount,
    close: async () => {
      try {
        await db.destroy();
        secureFiles();
      } finally {
        afterClose();
      }
    },
  };
}

const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);
/**
 * 57P01 administrator command (`pg_terminate_backend`, a fast shutdown), 57P02 crash shutdown, 57P03
 * cannot connect now (starting up, in recovery), 57P05 idle-session timeout, 25P03 idle-in-transaction
 * timeout, 53300 too many connections (the server's, the role's or the database's limit).
 */
/**
 * Sessions ended or refused (57P0x, 53300), an idle transaction timed out (25P03), a statement cancelled
 * by `statement_timeout` or an administrator (57014), a lock not had within `lock_timeout` (55P03), and
 * the server short of disk or memory (class 53): moments a retry may outlast.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '57P05', '25P03', '57014', '55P03']);

/** True when an error means "the database cannot be reached right now", not "the query is wrong". */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_NODE_CODES.has(code)) return true;
    // SQLSTATE class 08 (connection exception), class 53 (insufficient resources), and the codes above.
    if (code.startsWith('08') || code.startsWith('53') || UNAVAILABLE_SQLSTATES.has(code)) return true;
  }
  // A prepared statement whose table a newer process's migration changed, inside a transaction: the
  // connection has prepared it again for the next try (named-statements.ts).
  if (isChangedShape(error)) return true;
  return /Connection terminated|timeout exceeded when trying to connect|is not queryable/i.test(error.message);
}

/**
 * Runs a transaction again, once, if PostgreSQL broke a deadlock by aborting it (SQLSTATE 40P01): for a
 * transaction that writes rows before it takes a shared lock, which another transaction may hold while
 * it waits on one of those rows. The second run sees the other's commit.
 */
export async function retryOnDeadlock<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if ((error as { code?: unknown } | undefined)?.code !== '40P01') throw error;
    return run();
  }
}

/** The constraint a unique violation (SQLSTATE 23505) hit, or undefined for any other error. */
export function uniqueViolation(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, constraint } = error as { code?: unknown; constraint?: unknown };
  return code === '23505' ? String(constraint ?? '') : undefined;
}
