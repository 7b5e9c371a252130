import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import { trackTransactions } from '../src/infra/db/transactions.ts';

/**
 * Runs `callback` inside a database transaction as the server marks one, on a database that never
 * connects (Kysely's dummy driver): for tests of the guard every outbound client has, which needs the
 * transaction's mark, not its rows.
 */
export function insideTransaction<T>(callback: () => Promise<T>): Promise<T> {
  const db = trackTransactions(
    new Kysely<Record<string, never>>({
      dialect: {
        createAdapter: () => new PostgresAdapter(),
        createDriver: () => new DummyDriver(),
        createIntrospector: (kysely) => new PostgresIntrospector(kysely),
        createQueryCompiler: () => new PostgresQueryCompiler(),
      },
    }),
  );
  return db.transaction().execute(callback);
}
