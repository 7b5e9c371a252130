import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Kysely, type Migration, sql } from 'kysely';
import { testDatabases } from '../../../test/harness.ts';
import { migrateToLatest } from './migrate.ts';

/** A migration that creates one table, named after it. */
const creates = (table: string): Migration => ({
  up: async (db) => {
    await db.schema
      .createTable(table)
      .addColumn('id', 'integer', (c) => c.primaryKey())
      .execute();
  },
});

const tables = async <DB>(db: Kysely<DB>) =>
  (
    await sql<{
      name: string;
    }>`select tablename as name from pg_tables where schemaname = current_schema() and tablename like 't_%' order by 1`.execute(db)
  ).rows.map((row) => row.name);

/** Counts the statements a Kysely handle runs. */
function counted<DB>(db: Kysely<DB>): { db: Kysely<DB>; statements: () => number } {
  let statements = 0;
  const counting = db.withPlugin({
    transformQuery: (args) => {
      statements++;
      return args.node;
    },
    transformResult: async (args) => args.result,
  });
  return { db: counting, statements: () => statements };
}

for (const target of testDatabases()) {
  describe(`migrations [${target.name}]`, () => {
    test('a new database gets every migration in order; a later start finds it up to date in two reads and changes nothing', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      const migrations = { '0001_one': creates('t_one'), '0002_two': creates('t_two') };
      assert.deepEqual(await migrateToLatest(handle.db, migrations), ['0001_one', '0002_two']);
      assert.deepEqual(await tables(handle.db), ['t_one', 't_two']);

      const again = counted(handle.db);
      assert.deepEqual(await migrateToLatest(again.db, migrations), []);
      assert.equal(again.statements(), 2, 'an up-to-date database is read, not introspected and locked');
      assert.deepEqual(await tables(handle.db), ['t_one', 't_two']);
    });

    test('a database a migration behind gets exactly the missing one', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      await migrateToLatest(handle.db, { '0001_one': creates('t_one') });
      const applied = await migrateToLatest(handle.db, { '0001_one': creates('t_one'), '0002_two': creates('t_two') });
      assert.deepEqual(applied, ['0002_two']);
      assert.deepEqual(await tables(handle.db), ['t_one', 't_two']);
    });

    test('a database migrated by newer code (a migration this code does not know) is refused, not taken as up to date', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      await migrateToLatest(handle.db, { '0001_one': creates('t_one'), '0002_two': creates('t_two') });
      await assert.rejects(migrateToLatest(handle.db, { '0001_one': creates('t_one') }), /0002_two/);
      // The same count of names, one of them unknown: still not up to date.
      await assert.rejects(migrateToLatest(handle.db, { '0001_one': creates('t_one'), '0002_other': creates('t_other') }), /0002_two/);
      assert.deepEqual(await tables(handle.db), ['t_one', 't_two']);
    });
  });
}
