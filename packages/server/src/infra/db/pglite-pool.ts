import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';

/**
 * A pg-Pool-shaped front for PGlite, so Kysely's PostgresDialect drives both
 * databases with one SQL dialect. PGlite is a single connection: `connect()`
 * hands it out to one borrower at a time (a FIFO queue), which is exactly what
 * keeps a Kysely transaction's statements together.
 */
interface QueryResultLike {
  command: string;
  rowCount: number;
  rows: unknown[];
}

export interface PoolClientLike {
  query(sql: string, params?: readonly unknown[]): Promise<QueryResultLike>;
  release(): void;
}

/**
 * PostgreSQL settings of the embedded database. Its shared buffers live inside the WASM heap, which
 * never shrinks: PostgreSQL's default of 128 MB made most of the server's resident memory. 32 MB holds
 * the hot pages of a partner-sized database; the rest is read through the operating system's page
 * cache (decision 198).
 */
export const EMBEDDED_SETTINGS: readonly string[] = ['-c', 'shared_buffers=32MB'];

export class PGlitePool {
  readonly #db: PGlite;
  #busy = false;
  readonly #waiting: Array<() => void> = [];

  private constructor(db: PGlite) {
    this.#db = db;
  }

  /**
   * `dataDir` undefined keeps the database in memory (tests). A new data directory is created by
   * initdb inside the first instance, whose WASM heap grows for it and never shrinks: that instance is
   * closed and the database opened again, so a first start serves from the same memory as every later
   * one (decision 209).
   */
  static async open(dataDir: string | undefined): Promise<PGlitePool> {
    const options = { startParams: [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS] };
    if (dataDir === undefined) {
      const db = new PGlite(options);
      await db.waitReady;
      return new PGlitePool(db);
    }
    const created = !existsSync(join(dataDir, 'PG_VERSION'));
    let db = new PGlite(dataDir, options);
    await db.waitReady;
    if (created) {
      await db.close();
      db = new PGlite(dataDir, options);
      await db.waitReady;
    }
    return new PGlitePool(db);
  }

  async connect(): Promise<PoolClientLike> {
    if (this.#busy) {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
    this.#busy = true;
    let released = false;
    return {
      query: async (sql, params) => {
        const result = await this.#db.query(sql, params ? [...params] : []);
        // Kysely reads `command` only to report affected rows of writes.
        return { command: 'UPDATE', rowCount: result.affectedRows ?? 0, rows: result.rows };
      },
      release: () => {
        if (released) return;
        released = true;
        const next = this.#waiting.shift();
        if (next) next();
        else this.#busy = false;
      },
    };
  }

  async end(): Promise<void> {
    await this.#db.close();
  }
}
