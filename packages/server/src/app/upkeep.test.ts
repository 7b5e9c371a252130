import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import { startTestServer, testDatabases } from '../../test/harness.ts';

const embedded = testDatabases().find((target) => target.name === 'pglite');

/**
 * The server on the embedded database does autovacuum's work itself: a table whose rows
 * were deleted is vacuumed by a pass the server runs on its own, and the pass is logged.
 */
test('a server on the embedded database vacuums a table whose rows were deleted, unasked, and says so', async () => {
  assert.ok(embedded);
  const server = await startTestServer(embedded, { upkeepIntervalMs: 50 });
  try {
    const { db } = server.database;
    await sql`create table scratch (id int primary key)`.execute(db);
    await sql`insert into scratch select generate_series(1, 2000)`.execute(db);
    await sql`delete from scratch`.execute(db);
    const deadline = Date.now() + 10_000;
    const vacuumed = async () =>
      (await sql<{ at: Date | null }>`select last_vacuum as at from pg_stat_user_tables where relname = 'scratch'`.execute(db)).rows[0]?.at;
    while (!(await vacuumed()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(await vacuumed(), 'the table was vacuumed within 10 s');
    const line = server.logs.find(
      (entry) =>
        entry.component === 'upkeep' &&
        (entry.tables as { table: string; vacuumMs: number | null }[] | undefined)?.some(
          (t) => t.table === 'scratch' && t.vacuumMs !== null,
        ),
    );
    assert.ok(line, 'the pass is logged with the tables it vacuumed');
  } finally {
    await server.stop();
  }
});
