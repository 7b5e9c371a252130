import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite, type PGliteOptions, parse, protocol } from '@electric-sql/pglite';
import { isChangedShape, PreparedTexts } from './named-statements.ts';

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
 * never shrinks, and PostgreSQL touches all of them when it starts: PostgreSQL's default of 128 MB made
 * most of the server's resident memory. 8 MB (1,024 pages) holds the hot pages of the hot paths; the
 * rest is read through the operating system's page cache, and reads, token exchanges and operations
 * are no slower than with 16 or 32 MB.
 */
export const EMBEDDED_SETTINGS: readonly string[] = ['-c', 'shared_buffers=8MB'];

/** A compiled WebAssembly module (its type comes with the DOM's library, which this project does not load). */
type WasmModule = NonNullable<PGliteOptions['pgliteWasmModule']>;
const { WebAssembly: wasm } = globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> } };
let compiledPGlite: Promise<WasmModule> | undefined;

/**
 * PGlite's WebAssembly module (PostgreSQL, 9 MB), compiled once per process and shared by every
 * database it opens. Compiling runs on V8's background threads: `tenantry serve` starts it
 * before it loads the server's modules, so the two overlap, and each later database a process opens
 * (tests open hundreds) skips the compile.
 */
export function compilePGlite(): Promise<WasmModule> {
  compiledPGlite ??= readFile(new URL('./pglite.wasm', import.meta.resolve('@electric-sql/pglite'))).then((bytes) => wasm.compile(bytes));
  return compiledPGlite;
}

export class PGlitePool {
  readonly #db: PGlite;
  #busy = false;
  readonly #waiting: Array<() => void> = [];

  readonly #statements: PreparedStatements;

  private constructor(db: PGlite) {
    this.#db = db;
    this.#statements = new PreparedStatements(db);
  }

  /**
   * `dataDir` undefined keeps the database in memory (tests). A new data directory is created by
   * initdb inside the first instance, whose WASM heap grows for it and never shrinks: that instance is
   * closed and the database opened again, so a first start serves from the same memory as every later
   * one.
   */
  static async open(dataDir: string | undefined): Promise<PGlitePool> {
    const options = { startParams: [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS], pgliteWasmModule: await compilePGlite() };
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

  /** Borrowers waiting for the connection (pg.Pool's name for it). */
  get waitingCount(): number {
    return this.#waiting.length;
  }

  async connect(): Promise<PoolClientLike> {
    if (this.#busy) {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
    this.#busy = true;
    let released = false;
    return {
      query: async (sql, params) => {
        const result = await this.#statements.run(sql, params ?? []);
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

const { serialize } = protocol;
/** The messages every run of a prepared statement ends with, serialised once. */
const EXECUTE = serialize.execute({});
const SYNC = serialize.sync();

type BackendMessage = Awaited<ReturnType<PGlite['execProtocolStream']>>[number];
type Results = ReturnType<typeof parse.parseResults>[number];

/** A statement prepared on the session: its name, its parameters' types and its rows' description (none: it answers no rows). */
interface Prepared {
  name: string;
  types: number[];
  rows: BackendMessage | undefined;
}

/** How many statements stay prepared: more than the server's distinct hot statements, and a bounded cost in PostgreSQL's memory. */
export const PREPARED_MAX = 128;

/**
 * Statements prepared once and run by name. PGlite's own `query` parses and plans every
 * statement again, and in WebAssembly that is most of a read's cost. This runs the same protocol as
 * `query` (Bind, Describe, Execute, Sync on PGlite's exclusive lane, values serialised by PGlite's own
 * serialisers, rows parsed by its own parser), with a named Parse the first time a text is seen. The
 * least recently used statement is closed beyond PREPARED_MAX. A statement whose tables changed shape
 * since it was prepared (PostgreSQL's "cached plan must not change result type") is prepared again and
 * run once more, outside a transaction (inside one the error has aborted it: the caller sees the error).
 */
class PreparedStatements {
  readonly #db: PGlite;
  readonly #prepared = new PreparedTexts<Prepared>(PREPARED_MAX);
  /** The session's transaction state after the last statement: I (none), T (in one), E (in a failed one). */
  #status = 'I';

  constructor(db: PGlite) {
    this.#db = db;
  }

  run(sql: string, params: readonly unknown[]): Promise<Results> {
    return this.#db._runExclusiveQuery(async () => {
      try {
        return await this.#run(sql, params);
      } catch (error) {
        // Inside a transaction the failure aborted it: the caller sees it, and the next run outside one prepares again.
        if (!isChangedShape(error) || this.#status !== 'I') throw error;
        const stale = this.#prepared.remove(sql);
        if (!stale) throw error;
        await this.#close(stale.name);
        return await this.#run(sql, params);
      }
    });
  }

  async #run(sql: string, params: readonly unknown[]): Promise<Results> {
    let statement: Prepared;
    try {
      statement = this.#prepared.use(sql) ?? (await this.#prepare(sql));
    } catch (error) {
      this.#settle(await this.#exec(serialize.sync()));
      throw error;
    }
    const values = params.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serializer = this.#db.serializers[statement.types[i] ?? 0];
      return serializer ? serializer(value) : String(value);
    });
    // Bind, Execute and Sync in one exchange: PGlite runs every message of a buffer before it answers,
    // where an exchange a message costs its protocol round each. No Describe: the rows'
    // description is the one the statement's own Describe answered when it was prepared. After an error
    // PostgreSQL skips to the Sync, as it would over a socket; the error is among the answers.
    const messages = await this.#db.execProtocolStream(
      Buffer.concat([serialize.bind({ statement: statement.name, values }), EXECUTE, SYNC]),
      {
        syncToFs: false,
        throwOnError: false,
      },
    );
    const failure = this.#settle(messages);
    if (failure !== undefined) throw failure;
    await this.#db.syncToFs();
    if (statement.rows) messages.unshift(statement.rows);
    return parse.parseResults(messages, this.#db.parsers)[0] as Results;
  }

  /** Keeps the session's transaction state an exchange ended with (its ReadyForQuery); answers its first error, if any. */
  #settle(messages: BackendMessage[]): unknown {
    let failure: unknown;
    for (const message of messages) {
      if (message.name === 'readyForQuery') this.#status = (message as { status?: string }).status ?? this.#status;
      else if (message.name === 'error' && failure === undefined) failure = message;
    }
    return failure;
  }

  /** A named Parse of a text not prepared yet (one that does not parse is not kept). */
  async #prepare(sql: string): Promise<Prepared> {
    const name = this.#prepared.newName();
    await this.#exec(serialize.parse({ name, text: sql }));
    const described = await this.#exec(serialize.describe({ type: 'S', name }));
    const types = (described.find((m) => m.name === 'parameterDescription') as { dataTypeIDs?: number[] } | undefined)?.dataTypeIDs ?? [];
    const statement = { name, types, rows: described.find((m) => m.name === 'rowDescription') };
    const evicted = this.#prepared.add(sql, statement);
    if (evicted) await this.#close(evicted.name);
    return statement;
  }

  async #close(name: string): Promise<void> {
    await this.#exec(serialize.close({ type: 'S', name }));
  }

  #exec(message: Uint8Array): Promise<BackendMessage[]> {
    return this.#db.execProtocolStream(message, { syncToFs: false });
  }
}
