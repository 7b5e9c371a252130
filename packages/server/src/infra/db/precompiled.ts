import {
  type Compilable,
  CompiledQuery,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
} from 'kysely';

/** Compiles PostgreSQL and never connects. */
const compiler = new Kysely<unknown>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

/** A client of a connection pool, as `pg`'s and the embedded database's answer one. */
export interface PooledConnection {
  query(sql: string, values: unknown[]): Promise<{ command: string; rowCount: number | null; rows: unknown[] }>;
  release(): void;
}

/** A connection pool: `pg.Pool`, or the embedded database's `PGlitePool`. */
export interface ConnectionPool {
  connect(): Promise<PooledConnection>;
}

/** The pool under each handle that `openDatabase` opened (transactions are other objects: they are not here). */
const pools = new WeakMap<object, ConnectionPool>();

/**
 * Precompiled statements run on `db` itself (not on a transaction of it) take a connection from `pool`
 * and send their text and values there, as Kysely's executor would after its own layers: a read of the
 * hot path spends 2–4 µs and about 4 KB less. The connection is the one Kysely would have
 * used (the pool's `connect`, with the per-connection prepared statements of `named-statements.ts`).
 * Answers `db`.
 */
export function runPrecompiledOnPool<Handle extends object>(db: Handle, pool: ConnectionPool): Handle {
  pools.set(db, pool);
  return db;
}

/** Kysely's answer to a statement (as its PostgreSQL driver builds it), from a connection's. */
function onPool<Row>(pool: ConnectionPool, sql: string, values: unknown[]): Promise<QueryResult<Row>> {
  return pool.connect().then((connection) =>
    connection.query(sql, values).then(
      ({ command, rowCount, rows }) => {
        connection.release();
        const writes = command === 'INSERT' || command === 'UPDATE' || command === 'DELETE' || command === 'MERGE';
        return { numAffectedRows: writes ? BigInt(rowCount ?? 0) : undefined, rows: (rows ?? []) as Row[] };
      },
      (error: unknown) => {
        connection.release();
        throw error;
      },
    ),
  );
}

/** Stands for an argument while a query is compiled; replaced by the argument's value on each run. */
class Slot {
  readonly name: string;
  /** The field of a row argument this stands for. */
  readonly field: string | undefined;
  constructor(name: string, field?: string) {
    this.name = name;
    this.field = field;
  }

  /** Computing with a stand-in (`args.n + 1`, `${args.id}`, `args.a < args.b`) would compile its result in as a constant. */
  [Symbol.toPrimitive](): never {
    throw new Error(
      `precompile: argument "${this.label()}" is computed with while the query is built; compute it before and pass the result`,
    );
  }

  /** `JSON.stringify(args.attrs)` likewise: pass the JSON text as the argument. */
  toJSON(): never {
    throw new Error(`precompile: argument "${this.label()}" is serialised while the query is built; serialise it before and pass the text`);
  }

  label(): string {
    return this.field === undefined ? this.name : `${this.name}.${this.field}`;
  }
}

interface Compiled {
  sql: string;
  parameters: readonly unknown[];
  /** For each parameter, the argument (or row argument's field) it takes, or undefined for a constant of the query. */
  slots: Array<Slot | undefined>;
}

export interface PrecompileOptions<Args> {
  /**
   * Arguments that are rows (`insertInto(…).values(args.row)`): each field is a bound value of its own,
   * and the row's fields are those of the first run's row (a typed row always has the same). A field
   * given as `undefined` is written as null, not left to the column's default as Kysely would.
   */
  rows?: ReadonlyArray<keyof Args & string>;
}

/**
 * A query built and compiled once, then run with each call's arguments: for a statement that runs
 * thousands of times a second, Kysely's building and compiling (10–20 µs for a statement with a
 * subquery or a few CTEs, more under a busy process's garbage collection) is paid once instead of per
 * run.
 *
 * `build` receives stand-ins for its named arguments and must use each only as a bound value
 * (`where('uid', '=', args.uid)`, a column's value in `values({...})` or `set({...})`, a `sql`
 * template's value), never to choose the query's shape or as an object to read further. Refused at
 * the first run: an argument read by `build` that does not end up as a bound value (`args.to ===
 * 'active'`, `args.row.uid`), one passed then that `build` never binds (a filter forgotten), and one
 * computed with or serialised (`args.n + 1`, `${args.id}`, `JSON.stringify(args.attrs)`). Not
 * detectable, so never done: testing a stand-in's truth (`args.x ?? 'default'`, `args.flag ? … : …`,
 * `$if(args.flag, …)`): a stand-in is an object, always there and always true. A statement with a
 * few shapes is a few precompiled queries, chosen by the caller. Whatever varies between runs must
 * come in through `args`: a value `build` makes itself (`newId()`, `new Date()`) is compiled in as a
 * constant.
 *
 * A row to insert is one argument named in `options.rows`; each of its fields is bound apart, and the
 * fields are those of the first run's row: a field a later row adds is not written (a typed row always
 * has the same fields).
 */
export function precompile<DB, Args extends object, Row>(
  build: (query: Kysely<DB>, args: Args) => Compilable<Row>,
  options: PrecompileOptions<Args> = {},
): (db: Kysely<DB>, args: Args) => Promise<QueryResult<Row>> {
  let compiled: Compiled | undefined;
  return (db, args) => {
    if (!compiled) {
      try {
        compiled = compileWithSlots(build, args, new Set(options.rows));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    const { sql, parameters, slots } = compiled;
    const given = args as Record<string, Record<string, unknown>>;
    const values = new Array<unknown>(parameters.length);
    for (let i = 0; i < parameters.length; i++) {
      const slot = slots[i];
      if (slot === undefined) values[i] = parameters[i];
      else if (slot.field === undefined) values[i] = given[slot.name];
      else values[i] = given[slot.name]?.[slot.field];
    }
    const pool = pools.get(db);
    return pool ? onPool<Row>(pool, sql, values) : db.executeQuery<Row>(CompiledQuery.raw(sql, values));
  };
}

/**
 * Compiles `build` with stand-ins for the first run's `args`: every argument read, and every one given
 * (each field of a row), must end up a bound value.
 */
function compileWithSlots<DB, Args extends object, Row>(
  build: (query: Kysely<DB>, args: Args) => Compilable<Row>,
  args: Args,
  rows: ReadonlySet<string>,
): Compiled {
  const expected = new Map<string, Slot[]>();
  const standIn = (name: string): unknown => {
    if (!rows.has(name)) {
      const slot = new Slot(name);
      expected.set(name, [slot]);
      return slot;
    }
    const fields = Object.keys((args as Record<string, object>)[name] ?? {});
    const slots = fields.map((field) => new Slot(name, field));
    expected.set(name, slots);
    return Object.fromEntries(slots.map((slot) => [slot.field, slot]));
  };
  const stand = new Proxy({} as Args, {
    get: (_target, name) => (typeof name === 'string' ? standIn(name) : undefined),
  });
  const query = build(compiler as Kysely<DB>, stand).compile();
  const slots = query.parameters.map((value) => (value instanceof Slot ? value : undefined));
  const bound = new Set(slots.map((slot) => slot && `${slot.name}.${slot.field}`));
  for (const name of Object.keys(args)) if (!expected.has(name)) standIn(name);
  for (const [name, expectedSlots] of expected) {
    if (expectedSlots.length === 0 || expectedSlots.some((slot) => !bound.has(`${slot.name}.${slot.field}`)))
      throw new Error(`precompile: argument "${name}" is not a bound value of the query`);
  }
  return { sql: query.sql, parameters: query.parameters, slots };
}
