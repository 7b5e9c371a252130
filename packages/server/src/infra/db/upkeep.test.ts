import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Kysely, sql } from 'kysely';
import { type DatabaseHandle, openDatabase } from './database.ts';
import { runUpkeep, upkeepNeeded } from './upkeep.ts';

const size = async (db: Kysely<unknown>, table: string) =>
  Number((await sql<{ size: number }>`select pg_relation_size(${table}::regclass)::float8 as size`.execute(db)).rows[0]?.size);

const fill = (db: Kysely<unknown>, table: string, from: number, to: number) =>
  sql`insert into ${sql.id(table)} select g, repeat('x', 200) from generate_series(${from}::int, ${to}::int) g`.execute(db);

describe("the embedded database's upkeep: what autovacuum would do", () => {
  let handle: DatabaseHandle;
  before(async () => {
    handle = await openDatabase({ kind: 'embedded', dataDir: undefined });
  });
  after(async () => {
    await handle.close();
  });

  test('the space of deleted rows is used again after a pass; without one, the same churn doubles a table', async () => {
    const { db } = handle;
    for (const table of ['kept', 'neglected']) {
      await sql`create table ${sql.id(table)} (id int primary key, payload text not null)`.execute(db);
      await fill(db, table, 1, 5_000);
    }
    const full = await size(db, 'kept');
    assert.equal(await size(db, 'neglected'), full);
    for (const table of ['kept', 'neglected']) await sql`delete from ${sql.id(table)}`.execute(db);
    const steps = await runUpkeep(db, (table) => table !== 'neglected');
    assert.ok(
      (steps.find((step) => step.table === 'kept')?.vacuumMs ?? null) !== null,
      `the emptied table is vacuumed: ${JSON.stringify(steps)}`,
    );
    for (const table of ['kept', 'neglected']) await fill(db, table, 1, 5_000);

    assert.ok((await size(db, 'kept')) <= full, 'the same rows again fit in the pages the deleted ones left');
    assert.ok((await size(db, 'neglected')) >= 1.9 * full, 'with no pass, the new rows went after the dead ones');
  });

  test("the planner learns a table's size from a pass: its row count is the table's, not the day it was made", async () => {
    const { db } = handle;
    await sql`create table grown (id int primary key, payload text not null)`.execute(db);
    await fill(db, 'grown', 1, 100);
    await runUpkeep(db);
    await fill(db, 'grown', 101, 3_000);
    const before = (
      await sql<{ reltuples: number }>`select reltuples::float8 as reltuples from pg_class where relname = 'grown'`.execute(db)
    ).rows[0]?.reltuples;
    const steps = await runUpkeep(db);
    assert.deepEqual(
      steps
        .filter((step) => step.table === 'grown')
        .map(({ vacuumMs, analyzeMs }) => ({ vacuumed: vacuumMs !== null, analyzed: analyzeMs !== null })),
      [{ vacuumed: true, analyzed: true }],
    );
    const after = (
      await sql<{ reltuples: number }>`select reltuples::float8 as reltuples from pg_class where relname = 'grown'`.execute(db)
    ).rows[0]?.reltuples;
    assert.equal(before, 100);
    assert.equal(after, 3_000);
  });

  test('a statement prepared while its table was small is planned again once a pass has counted the grown table', async () => {
    // What the server's prepared statements go through: a plan made for a few rows is kept
    // as the table grows, until something tells PostgreSQL the table changed.
    const { db } = handle;
    await sql`create table outbox (id int primary key, payload text not null)`.execute(db);
    await fill(db, 'outbox', 1, 50);
    await sql`prepare touch (int[]) as update outbox set payload = 'y' from unnest($1::int[]) as v (id) where outbox.id = v.id`.execute(db);
    // Past the five runs PostgreSQL plans for their values: from here on it runs its generic plan.
    for (let i = 0; i < 6; i++) await sql`execute touch('{1,2,3}')`.execute(db);
    const plan = async () =>
      (await sql<{ 'QUERY PLAN': string }>`explain execute touch('{1,2,3}')`.execute(db)).rows.map((row) => row['QUERY PLAN']).join('\n');
    await fill(db, 'outbox', 51, 20_000);
    assert.match(await plan(), /Seq Scan on outbox/, "the small table's plan is kept: every run reads all 20,000 rows");
    await runUpkeep(db);
    assert.match(await plan(), /Index Scan using outbox_pkey on outbox/, 'after the pass, three rows are three index probes');
  });

  test('a table whose activity is under the thresholds is left alone', async () => {
    const { db } = handle;
    await sql`create table quiet (id int primary key, payload text not null)`.execute(db);
    await fill(db, 'quiet', 1, 1_000);
    await runUpkeep(db);
    await sql`update quiet set payload = 'y' where id <= 20`.execute(db);
    const steps = await runUpkeep(db);
    assert.equal(
      steps.find((step) => step.table === 'quiet'),
      undefined,
    );
  });
});

describe("autovacuum's thresholds", () => {
  const activity = { table: 't', reltuples: 1_000, n_dead_tup: 0, n_mod_since_analyze: 0, n_ins_since_vacuum: 0 };
  test('dead rows past 50 + 20%, inserts past 1,000 + 20%: vacuum', () => {
    assert.deepEqual(upkeepNeeded({ ...activity, n_dead_tup: 250 }), { vacuum: false, analyze: false });
    assert.deepEqual(upkeepNeeded({ ...activity, n_dead_tup: 251 }), { vacuum: true, analyze: false });
    assert.deepEqual(upkeepNeeded({ ...activity, n_ins_since_vacuum: 1_201 }), { vacuum: true, analyze: false });
  });
  test('changes past 50 + 10%: analyze; a table never counted counts as empty', () => {
    assert.deepEqual(upkeepNeeded({ ...activity, n_mod_since_analyze: 151 }), { vacuum: false, analyze: true });
    assert.deepEqual(upkeepNeeded({ ...activity, reltuples: -1, n_mod_since_analyze: 51 }), { vacuum: false, analyze: true });
  });
});
