import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { testDatabases } from '../../../test/harness.ts';
import type { DatabaseHandle } from './database.ts';
import { precompile } from './precompiled.ts';

interface Tables {
  things: { id: string; owner: string; size: number };
}

const bySizeAndOwner = precompile(
  (q: Kysely<Tables>, owner: string, minSize: number) =>
    q
      .selectFrom('things')
      .select(['id', 'size'])
      .where('owner', '=', owner)
      .where('size', '>=', minSize)
      .where('id', '!=', 'hidden')
      .orderBy('id'),
  2,
);

for (const target of testDatabases()) {
  describe(`precompiled queries (${target.name})`, () => {
    let handle: DatabaseHandle<Tables>;
    let drop: () => Promise<void>;
    before(async () => {
      const created = await target.create();
      drop = created.drop;
      // The application's handle, typed for this test's one table.
      handle = created.handle as unknown as DatabaseHandle<Tables>;
      await handle.db.schema
        .createTable('things')
        .addColumn('id', 'text')
        .addColumn('owner', 'text')
        .addColumn('size', 'integer')
        .execute();
      await handle.db
        .insertInto('things')
        .values([
          { id: 'a', owner: 'ann', size: 1 },
          { id: 'b', owner: 'ann', size: 5 },
          { id: 'c', owner: 'bob', size: 9 },
          { id: 'hidden', owner: 'ann', size: 9 },
        ])
        .execute();
    });
    after(() => drop?.());

    test('each run binds its own arguments; constants of the query stay', async () => {
      assert.deepEqual(await bySizeAndOwner(handle.db, 'ann', 0), [
        { id: 'a', size: 1 },
        { id: 'b', size: 5 },
      ]);
      assert.deepEqual(await bySizeAndOwner(handle.db, 'ann', 2), [{ id: 'b', size: 5 }]);
      assert.deepEqual(await bySizeAndOwner(handle.db, 'bob', 0), [{ id: 'c', size: 9 }]);
    });

    test('an argument that does not end up as a bound value is refused, not silently ignored', async () => {
      const shapeFromArgument = precompile((q: Kysely<Tables>, _unused: string) => q.selectFrom('things').select('id'), 1);
      await assert.rejects(shapeFromArgument(handle.db, 'x'), /argument 0 is not a bound value/);
    });
  });
}
