import type { Socket } from 'node:net';
import pg from 'pg';
import { atEndOfTurn } from '../end-of-turn.ts';

/** Statements kept prepared per connection by default (TENANTRY_DATABASE_STATEMENT_CACHE). */
export const STATEMENT_CACHE_DEFAULT = 256;

type Query = (text: unknown, values?: unknown, callback?: unknown) => unknown;

/**
 * Makes a pooled PostgreSQL connection run each parameterised statement as a named prepared
 * statement. Kysely sends every statement as an unnamed one, which PostgreSQL parses,
 * analyses and plans again on every run; named, a statement is parsed once per connection and later
 * runs send only its values. Statements without values (transaction control, DDL) stay unnamed.
 *
 * Each connection keeps at most `max` statements, the least recently used deallocated beyond that
 * (a text with a variable number of values, such as `in ($1, $2, …)`, makes one statement per
 * length). Names are never reused, so a deallocation that fails (in a failed transaction) costs one
 * prepared statement on the server, not a wrong one.
 *
 * A statement whose table changed shape since it was prepared (a rolling upgrade's migration added a
 * column) fails with "cached plan must not change result type" (SQLSTATE 0A000): the connection
 * forgets it, and outside a transaction runs it again, prepared anew. Inside a transaction the
 * error aborted the transaction: it reaches the caller, and `isDatabaseUnavailable` counts it as a
 * moment's unavailability (a request answers 503 with Retry-After; background work looks again).
 */
export function prepareStatements(client: pg.PoolClient, max: number): void {
  if (max <= 0) return;
  const unnamed = client.query.bind(client) as Query;
  const prepared = new PreparedTexts<Statement>(max);
  const deallocate = (statement: Statement | undefined) => {
    // Queued behind the statement in flight, before the next one; its own failure changes nothing.
    if (statement !== undefined) (unnamed(`deallocate "${statement.name}"`) as Promise<unknown>).catch(() => {});
  };
  const named = (text: string, values: unknown[]) => {
    let statement = prepared.use(text);
    if (statement === undefined) {
      statement = { name: prepared.newName(), text, shape: undefined };
      deallocate(prepared.add(text, statement));
    }
    return runNamed(client, statement, values);
  };
  const query: Query = (text, values, callback) => {
    if (typeof text !== 'string' || !Array.isArray(values) || values.length === 0 || callback !== undefined)
      return unnamed(text, values, callback);
    const outsideTransaction = client.getTransactionStatus() === 'I';
    return named(text, values).catch((error: unknown) => {
      if (!isChangedShape(error)) throw error;
      deallocate(prepared.remove(text));
      if (!outsideTransaction) throw error;
      return named(text, values);
    });
  };
  (client as unknown as { query: Query }).query = query;
}

/** Answers a statement's result, or the error that failed it. */
type QueryCallback = (error: Error | null, result: pg.QueryResult | undefined) => void;

/** A statement a connection has prepared: its name there, and the shape of its rows once seen. */
interface Statement {
  readonly name: string;
  readonly text: string;
  shape: RowShape | undefined;
}

/**
 * What `pg` builds from a statement's description of its result columns: a parser per column, and the
 * empty row each result row is copied from; with them, this statement's own row parser.
 */
interface RowShape {
  fields: readonly pg.FieldDef[];
  parsers: ColumnParser[];
  emptyRow: object;
  parseRow: RowParser | undefined;
}

type ColumnParser = (raw: unknown) => unknown;
type RowParser = (rowData: readonly unknown[]) => object;

/** The parts of `pg`'s `Result` (lib/result.js) that its `addFields` sets and its `parseRow` reads. */
interface ResultInternals {
  fields: readonly pg.FieldDef[];
  _parsers: ColumnParser[] | undefined;
  _prebuiltEmptyResultObject: object | null;
  addFields(fields: readonly pg.FieldDef[]): void;
  parseRow: RowParser;
}

/**
 * How many first runs built a row shape from PostgreSQL's description, how many later runs used a kept
 * one without asking for a description, and how many of those parsed rows with the statement's own
 * parser (read by the tests).
 */
export const rowShapeCounts = { built: 0, kept: 0, ownParser: 0 };

/** The parts of `pg`'s connection (lib/connection.js) a query's `prepare` sends its messages through. */
interface ConnectionInternals {
  describe(message: unknown): void;
  stream: Socket;
}

type PgQuery = Omit<pg.Query, 'submit'> & {
  name: string;
  callback?: (err: Error | null, res: pg.QueryResult) => void;
  _result: ResultInternals;
  /** Set by `pg`'s `handleRowDescription`: whether rows are collected into the result. */
  _accumulateRows: boolean;
  prepare(connection: ConnectionInternals): void;
  submit(connection: ConnectionInternals): Error | null;
};

/** `pg`'s own `Result.prototype.addFields`. */
const buildRowShape = Object.getPrototypeOf((new pg.Query('') as unknown as PgQuery)._result).addFields as ResultInternals['addFields'];

/**
 * Runs a prepared statement as `client.query({ name, text, values })` would, for less:
 * - `pg` copies a configuration object property by property before it makes its query (1–2 µs in a
 *   profile); its `Query` made from the text takes none;
 * - `pg` asks the server to describe the result's columns at every execution (a Describe message, and
 *   a RowDescription back), and rebuilds from that description an array of column parsers and the
 *   empty row it copies for each result row: 5–6 µs of a `GET /customers/{id}` in a profile, the
 *   largest single cost of the request's JavaScript. A prepared statement's columns are
 *   the same at every execution: PostgreSQL refuses to run one whose result changed ("cached plan must
 *   not change result type", handled in `prepareStatements`). So the first run on a connection builds
 *   the row shape from the description, and later runs use it without asking for one:
 *   its column parsers, its empty row and its own row parser (`compileRowParser`).
 * Resolves and rejects as `client.query` does.
 */
function runNamed(client: pg.PoolClient, statement: Statement, values: unknown[]): Promise<pg.QueryResult> {
  return new Promise<pg.QueryResult>((resolve, reject) => {
    submitNamed(client, statement, values, (err, res) => (err ? reject(err) : resolve(res as pg.QueryResult)));
  }).catch((err: Error) => {
    // As `pg` does: a stack that leads back to the caller, not to the socket's read.
    Error.captureStackTrace(err);
    throw err;
  });
}

/**
 * `runNamed`'s work, answering through `callback` (called once, from the socket's read). Apart from
 * `runNamed` so that no closure of the promise's shares a scope with the query: when the
 * query and its rows are in the scope of the promise's callbacks, a read on PostgreSQL leaves about 2 KB
 * alive across two of V8's young-generation collections, which the collector then promotes (0.9 MB a
 * scavenge under `GET /customers/{id}`, a full collection every second); built here, 7–13 KB.
 */
function submitNamed(client: pg.PoolClient, statement: Statement, values: unknown[], callback: QueryCallback): void {
  const query = new pg.Query(statement.text, values) as unknown as PgQuery;
  query.name = statement.name;
  const shape = statement.shape;
  if (shape === undefined) {
    // The first run on this connection: the description PostgreSQL sends is turned into the shape, kept.
    query._result.addFields = function (this: ResultInternals, fields) {
      rowShapeCounts.built++;
      buildRowShape.call(this, fields);
      if (this._parsers !== undefined && this._prebuiltEmptyResultObject !== null)
        statement.shape = {
          fields,
          parsers: this._parsers,
          emptyRow: this._prebuiltEmptyResultObject,
          parseRow: compileRowParser(fields, this._parsers),
        };
    };
  } else {
    useKnownShape(query, shape);
  }
  query.submit = submitAtEndOfTurn;
  query.callback = callback as PgQuery['callback'];
  client.query(query as unknown as pg.QueryConfig);
}

/**
 * A row parser for one statement's columns: `pg`'s `parseRow` copies the empty row and
 * stores each column under its name, one loop for the rows of every statement, so V8's caches in it see
 * rows of every shape (4.3 µs a read of `GET /customers/{id}` in a profile, against 1.7 in the raw-SELECT
 * floor's, which runs one statement). This one is generated for the columns at hand, as
 * fast-json-stringify generates a serialiser per schema: one object literal with the column names as
 * keys, each column's parser called from a call site of its own. It answers what `pg`'s does: the
 * columns in their order, a name given twice keeping its first place and its last value, null for
 * NULL, a plain object. Names are written as JSON string literals (valid JavaScript, whatever the
 * name holds). Left to `pg`: binary columns (`pg` copies them first) and a column named `__proto__`
 * (a literal would set the prototype).
 */
export function compileRowParser(fields: readonly pg.FieldDef[], parsers: readonly ColumnParser[]): RowParser | undefined {
  if (fields.length !== parsers.length || fields.some((field) => field.format === 'binary' || field.name === '__proto__')) return undefined;
  const columns = fields.map((field, i) => `${JSON.stringify(field.name)}: (v = d[${i}]) === null ? null : p${i}(v)`);
  const source = `"use strict";
const [${fields.map((_, i) => `p${i}`).join(', ')}] = parsers;
return function parseRow(d) {
  let v;
  return { ${columns.join(', ')} };
};`;
  return new Function('parsers', source)(parsers) as RowParser;
}

/**
 * A later run of a statement whose row shape is known: the result is set up as `pg`'s
 * `handleRowDescription` would set it from a description (the columns, their parsers, the empty row,
 * rows collected), and the query is sent without the Describe message, so PostgreSQL sends no
 * description. `pg`'s own `prepare` sends the rest (Parse when needed, Bind, Execute, Sync).
 */
function useKnownShape(query: PgQuery, shape: RowShape): void {
  rowShapeCounts.kept++;
  const result = query._result;
  result.fields = shape.fields;
  result._parsers = shape.parsers;
  result._prebuiltEmptyResultObject = shape.emptyRow;
  if (shape.parseRow !== undefined) {
    rowShapeCounts.ownParser++;
    result.parseRow = shape.parseRow;
  }
  query._accumulateRows = true;
  query.prepare = prepareWithoutDescribe;
}

/** `pg`'s own `Query.prototype.prepare`. */
const pgPrepare = (pg.Query.prototype as unknown as PgQuery).prepare;

/** `pg`'s `prepare`, its connection's `describe` a no-op while it runs. */
function prepareWithoutDescribe(this: PgQuery, connection: ConnectionInternals): void {
  const describe = connection.describe;
  connection.describe = skipDescribe;
  try {
    pgPrepare.call(this, connection);
  } finally {
    connection.describe = describe;
  }
}

function skipDescribe(): void {}

/** `pg`'s own `Query.prototype.submit`. */
const pgSubmit = (pg.Query.prototype as unknown as PgQuery).submit;

/**
 * `pg`'s `submit`, its messages held in the socket until the end of this turn of the event loop
 * so the statements of the requests handled in one turn leave together, so the PostgreSQL
 * backends they wake are woken in one go, not one between each request's JavaScript and the next.
 * `pg` corks the socket around its messages; the cork taken here first keeps them there after its uncork.
 */
function submitAtEndOfTurn(this: PgQuery, connection: ConnectionInternals): Error | null {
  connection.stream.cork();
  atEndOfTurn(uncork, connection.stream);
  return pgSubmit.call(this, connection);
}

function uncork(stream: Socket): void {
  stream.uncork();
}

/**
 * The texts a connection has prepared and what each was prepared as, least recently used first, at
 * most `max` of them; names are never reused. Both drivers keep theirs in one (this file, and
 * `pglite-pool.ts` for the embedded database).
 */
export class PreparedTexts<V> {
  readonly #max: number;
  // Insertion order is recency order: a use moves the text to the end.
  readonly #byText = new Map<string, V>();
  #next = 0;

  constructor(max: number) {
    this.#max = max;
  }

  newName(): string {
    return `tenantry_${this.#next++}`;
  }

  /** What `text` was prepared as, now the most recently used; undefined if it is not prepared. */
  use(text: string): V | undefined {
    const value = this.#byText.get(text);
    if (value === undefined) return undefined;
    this.#byText.delete(text);
    this.#byText.set(text, value);
    return value;
  }

  /** Records a text just prepared; answers what the least recently used one beyond `max` was, now forgotten (to close it). */
  add(text: string, value: V): V | undefined {
    let evicted: V | undefined;
    if (this.#byText.size >= this.#max) {
      const oldest = this.#byText.keys().next().value;
      if (oldest !== undefined) evicted = this.remove(oldest);
    }
    this.#byText.set(text, value);
    return evicted;
  }

  /** Forgets `text`; answers what it was prepared as (to close it). */
  remove(text: string): V | undefined {
    const value = this.#byText.get(text);
    this.#byText.delete(text);
    return value;
  }
}

/** PostgreSQL's refusal to run a prepared statement whose result's columns changed since it was prepared. */
export function isChangedShape(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === '0A000' && typeof message === 'string' && message.includes('cached plan must not change result type');
}
