import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PGlitePool, PREPARED_MAX } from './pglite-pool.ts';

describe('the embedded database runs statements prepared once', () => {
  let pool: PGlitePool;
  const query = async (sql: string, params: unknown[] = []) => {
    const client = await pool.connect();
    try {
      return await client.query(sql, params);
    } finally {
      client.release();
    }
  };
  const prepared = async () =>
    (await query('select statement from pg_prepared_statements')).rows.map((row) => (row as { statement: string }).statement);

  before(async () => {
    pool = await PGlitePool.open(undefined);
  });
  after(() => pool?.end());

  test('a statement is prepared once and answers every later run with that run’s values', async () => {
    const text = 'select $1::int * 2 as doubled';
    for (const n of [1, 2, 3]) assert.deepEqual((await query(text, [n])).rows, [{ doubled: n * 2 }]);
    assert.equal((await prepared()).filter((statement) => statement === text).length, 1);
  });

  test('values go in and come out as with PGlite’s own query', async () => {
    const at = new Date('2026-11-25T10:00:00.000Z');
    const { rows } = await query(
      'select $1::jsonb as j, $2::timestamptz as t, $3::boolean as b, $4::text as s, $5::int as n, $6::text as missing',
      [{ a: [1, 'x'] }, at, false, "it's", 7, null],
    );
    assert.deepEqual(rows, [{ j: { a: [1, 'x'] }, t: at, b: false, s: "it's", n: 7, missing: null }]);
  });

  test('a statement whose table changed shape is prepared again and reads the new shape', async () => {
    await query('create table shapes (id int primary key)');
    await query('insert into shapes values (1)');
    assert.deepEqual((await query('select * from shapes')).rows, [{ id: 1 }]);
    await query("alter table shapes add column label text not null default 'new'");
    assert.deepEqual((await query('select * from shapes')).rows, [{ id: 1, label: 'new' }]);
  });

  test('inside a transaction a changed shape fails that transaction with its own error; the statement works again after it', async () => {
    await query('create table inside (id int primary key)');
    await query('insert into inside values (1)');
    assert.deepEqual((await query('select * from inside')).rows, [{ id: 1 }]);
    await query('alter table inside add column label text');
    const client = await pool.connect();
    try {
      await client.query('begin');
      await assert.rejects(client.query('select * from inside'), { code: '0A000' });
      await client.query('rollback');
    } finally {
      client.release();
    }
    assert.deepEqual((await query('select * from inside')).rows, [{ id: 1, label: null }]);
  });

  test('errors answer with their code, leave the connection usable, and a text that did not parse is not kept', async () => {
    await query('create table once (id int primary key)');
    await query('insert into once values ($1)', [1]);
    await assert.rejects(query('insert into once values ($1)', [1]), { code: '23505' });
    await assert.rejects(query('selec nothing'), { code: '42601' });
    assert.deepEqual((await query('select count(*)::int as n from once')).rows, [{ n: 1 }]);
    assert.ok(!(await prepared()).includes('selec nothing'));
  });

  test(`at most ${PREPARED_MAX} statements stay prepared, the least recently used closed first`, async () => {
    const texts = Array.from({ length: PREPARED_MAX + 40 }, (_, i) => `select $1::int + ${i} as v`);
    for (const [i, text] of texts.entries()) assert.deepEqual((await query(text, [1])).rows, [{ v: 1 + i }]);
    const held = await prepared();
    assert.ok(held.length <= PREPARED_MAX, `${held.length} prepared`);
    assert.ok(!held.includes(texts[0] ?? ''), 'the oldest was closed');
    assert.ok(held.includes(texts.at(-1) ?? ''), 'the newest is held');
    // A closed statement is prepared again when it comes back.
    assert.deepEqual((await query(texts[0] ?? '', [5])).rows, [{ v: 5 }]);
  });
});

test('the embedded database keeps 8 MB of shared buffers in its WASM heap, not PostgreSQL’s 128 MB', async () => {
  const pool = await PGlitePool.open(undefined);
  try {
    const client = await pool.connect();
    try {
      assert.deepEqual((await client.query('show shared_buffers')).rows, [{ shared_buffers: '8MB' }]);
    } finally {
      client.release();
    }
  } finally {
    await pool.end();
  }
});
