import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Kysely, sql } from 'kysely';
import { testDatabases } from '../../../test/harness.ts';
import type { DatabaseHandle } from './database.ts';
import { precompile } from './precompiled.ts';

interface Tables {
  things: { id: string; owner: string; size: number };
}

const bySizeAndOwner = precompile((q: Kysely<Tables>, args: { owner: string; minSize: number }) =>
  q
    .selectFrom('things')
    .select(['id', 'size'])
    .where('owner', '=', args.owner)
    .where('size', '>=', args.minSize)
    .where('id', '!=', 'hidden')
    .orderBy('id'),
);

/** A write: the same argument bound twice, and the count of rows it changed. */
const grow = precompile((q: Kysely<Tables>, args: { owner: string; by: number }) =>
  q
    .updateTable('things')
    .set((eb) => ({ size: eb('size', '+', args.by) }))
    .where('owner', '=', args.owner)
    .where('size', '<', args.by),
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
      const rows = async (owner: string, minSize: number) => (await bySizeAndOwner(handle.db, { owner, minSize })).rows;
      assert.deepEqual(await rows('ann', 0), [
        { id: 'a', size: 1 },
        { id: 'b', size: 5 },
      ]);
      assert.deepEqual(await rows('ann', 2), [{ id: 'b', size: 5 }]);
      assert.deepEqual(await rows('bob', 0), [{ id: 'c', size: 9 }]);
    });

    test('a write answers the rows it changed, its argument bound wherever the query uses it', async () => {
      await handle.db.transaction().execute(async (trx) => {
        const changed = await grow(trx, { owner: 'bob', by: 10 });
        assert.equal(changed.numAffectedRows, 1n);
        assert.deepEqual(await trx.selectFrom('things').select('size').where('id', '=', 'c').execute(), [{ size: 19 }]);
        assert.equal((await grow(trx, { owner: 'bob', by: 10 })).numAffectedRows, 0n);
        await trx.updateTable('things').set({ size: 9 }).where('id', '=', 'c').execute();
      });
    });

    // A connection not given back stops the next statement: the test times out.
    test('on the handle itself, a statement takes a connection and gives it back, whether it succeeds or fails', {
      timeout: 20_000,
    }, async () => {
      // Outside a transaction, precompiled statements go to the pool directly: a write
      // still answers its count of rows, a failure is the database's own error, and every connection
      // comes back (the pool has ten; the embedded database one, so a single one kept would stop it).
      assert.equal((await grow(handle.db, { owner: 'bob', by: 10 })).numAffectedRows, 1n);
      assert.equal((await grow(handle.db, { owner: 'bob', by: 10 })).numAffectedRows, 0n);
      await handle.db.updateTable('things').set({ size: 9 }).where('id', '=', 'c').execute();
      const divided = precompile((q: Kysely<Tables>, args: { by: number }) =>
        q.selectFrom('things').select(sql<number>`size / ${args.by}`.as('part')).where('id', '=', 'c'),
      );
      assert.deepEqual((await divided(handle.db, { by: 3 })).rows, [{ part: 3 }]);
      for (let i = 0; i < 12; i++) await assert.rejects(divided(handle.db, { by: 0 }), { code: '22012' });
      assert.deepEqual((await bySizeAndOwner(handle.db, { owner: 'bob', minSize: 0 })).rows, [{ id: 'c', size: 9 }]);
    });

    test('a row argument binds each of its fields', async () => {
      const insert = precompile((q: Kysely<Tables>, args: { thing: Tables['things'] }) => q.insertInto('things').values(args.thing), {
        rows: ['thing'],
      });
      await handle.db.transaction().execute(async (trx) => {
        await insert(trx, { thing: { id: 'd', owner: 'dan', size: 3 } });
        await insert(trx, { thing: { id: 'e', owner: 'eve', size: 4 } });
        assert.deepEqual(await trx.selectFrom('things').selectAll().where('id', 'in', ['d', 'e']).orderBy('id').execute(), [
          { id: 'd', owner: 'dan', size: 3 },
          { id: 'e', owner: 'eve', size: 4 },
        ]);
        await trx.deleteFrom('things').where('id', 'in', ['d', 'e']).execute();
      });
    });

    test('an argument that does not end up as a bound value is refused, not silently ignored', async () => {
      // A row of which a field is not bound.
      const partly = precompile(
        (q: Kysely<Tables>, args: { thing: Tables['things'] }) => q.selectFrom('things').select('size').where('id', '=', args.thing.id),
        { rows: ['thing'] },
      );
      await assert.rejects(partly(handle.db, { thing: { id: 'a', owner: 'ann', size: 1 } }), /argument "thing" is not a bound value/);
      const unused = precompile((q: Kysely<Tables>, _args: { owner: string }) => q.selectFrom('things').select('id'));
      await assert.rejects(unused(handle.db, { owner: 'x' }), /argument "owner" is not a bound value/);
      // Read to choose the shape: the stand-in is never equal to a value, so the shape would be wrong.
      const shaped = precompile((q: Kysely<Tables>, args: { owner: string; all: boolean }) =>
        q
          .selectFrom('things')
          .select('id')
          .$if(!args.all, (s) => s.where('owner', '=', args.owner)),
      );
      await assert.rejects(shaped(handle.db, { owner: 'ann', all: true }), /argument "all" is not a bound value/);
      // Read as an object: its fields would be constants of the query.
      const nested = precompile((q: Kysely<Tables>, args: { thing: { id: string } }) =>
        q.selectFrom('things').select('size').where('id', '=', args.thing.id),
      );
      await assert.rejects(nested(handle.db, { thing: { id: 'a' } }), /argument "thing" is not a bound value/);
      // Computed with, or serialised: the result would be a constant of the query.
      const computed = precompile((q: Kysely<Tables>, args: { minSize: number }) =>
        q
          .selectFrom('things')
          .select('id')
          .where('size', '>=', args.minSize + 1),
      );
      await assert.rejects(computed(handle.db, { minSize: 1 }), /argument "minSize" is computed with/);
      const serialised = precompile((q: Kysely<Tables>, args: { owner: { name: string } }) =>
        q.selectFrom('things').select('id').where('owner', '=', JSON.stringify(args.owner)),
      );
      await assert.rejects(serialised(handle.db, { owner: { name: 'ann' } }), /argument "owner" is serialised/);
    });
  });
}
