import { type Compilable, CompiledQuery, DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';

/** Compiles PostgreSQL and never connects. */
const compiler = new Kysely<unknown>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

/** Stands for an argument while a query is compiled; replaced by the argument's value on each run. */
class Slot {
  readonly index: number;
  constructor(index: number) {
    this.index = index;
  }
}

/**
 * A query built and compiled once, then run with new argument values: for a hot read that runs
 * thousands of times a second, Kysely's building and compiling (about 10 µs for a read with a
 * subquery) is paid once instead of per request (decision 192). `build` receives stand-ins for its
 * arguments and must use each only as a bound value (`where(column, '=', id)`), never to choose the
 * query's shape; a stand-in used any other way fails at compile time.
 */
export function precompile<DB, Args extends unknown[], Row>(
  build: (query: Kysely<DB>, ...args: Args) => Compilable<Row>,
  arity: Args['length'],
): (db: Kysely<DB>, ...args: Args) => Promise<Row[]> {
  let compiled: { sql: string; parameters: readonly unknown[]; slots: Array<number | undefined> } | undefined;
  return async (db, ...args) => {
    if (!compiled) {
      const slots = Array.from({ length: arity }, (_, i) => new Slot(i));
      const query = build(compiler as Kysely<DB>, ...(slots as unknown as Args)).compile();
      const positions = query.parameters.map((value) => (value instanceof Slot ? value.index : undefined));
      for (let i = 0; i < arity; i++) {
        if (!positions.includes(i)) throw new Error(`precompile: argument ${i} is not a bound value of the query`);
      }
      compiled = { sql: query.sql, parameters: query.parameters, slots: positions };
    }
    const { sql, parameters, slots } = compiled;
    const values = parameters.map((value, i) => {
      const slot = slots[i];
      return slot === undefined ? value : args[slot];
    });
    const result = await db.executeQuery<Row>(CompiledQuery.raw(sql, values));
    return result.rows;
  };
}
