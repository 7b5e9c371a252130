import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { testDatabases } from '../../test/harness.ts';
import { migrate } from './database.ts';

for (const target of testDatabases()) {
  describe(`the migrated schema [${target.name}]`, () => {
    test('holds no function of ours: every rule runs in TypeScript, once', async (t) => {
      const { handle, drop } = await target.create();
      t.after(drop);
      await migrate(handle.db);
      // Functions an extension brings (pg_depend deptype 'e') are the extension's, not ours.
      const { rows } = await sql<{ name: string }>`
        select p.proname as name
          from pg_proc p
          join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = current_schema()
           and not exists (select from pg_depend d
                            where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
         order by 1`.execute(handle.db);
      assert.deepEqual(
        rows.map((row) => row.name),
        [],
      );
    });
  });
}
