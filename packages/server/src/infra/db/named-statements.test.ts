import assert from 'node:assert/strict';
import type { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { createServerDatabase, dropServerDatabase } from '../../../test/harness.ts';
import { type DatabaseHandle, isDatabaseUnavailable, openDatabase } from './database.ts';
import { compileRowParser, isChangedShape, PreparedTexts, prepareStatements, rowShapeCounts } from './named-statements.ts';

const SERVER = process.env.TENANTRY_TEST_DATABASE_URL;

/** Runs `work` on one pooled connection: prepared statements belong to a connection. */
const onOneConnection = <T>(db: Kysely<unknown>, work: (conn: Kysely<unknown>) => Promise<T>) => db.connection().execute(work);
const prepared = async (conn: Kysely<unknown>) =>
  (await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(conn)).rows.map((row) => row.statement);

describe('a PostgreSQL server runs statements prepared once per connection', {
  skip: !SERVER && 'needs TENANTRY_TEST_DATABASE_URL',
}, () => {
  let url: string;
  const handles: DatabaseHandle[] = [];
  const open = async (statementCache?: number) => {
    const handle = await openDatabase({ kind: 'postgres', url, statementCache });
    handles.push(handle);
    return handle.db;
  };

  /** A lone `pg` client (no pool) whose statements are prepared, to watch its connection and socket. */
  const preparedClient = async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    prepareStatements(client as unknown as pg.PoolClient, 16);
    return client;
  };

  before(async () => {
    url = await createServerDatabase();
  });
  after(async () => {
    for (const handle of handles) await handle.close();
    await dropServerDatabase(url);
  });

  test('a statement with values is prepared once and answers each run with its own values; one without stays unnamed', async () => {
    const db = await open();
    await onOneConnection(db, async (conn) => {
      for (const n of [1, 2, 3]) assert.deepEqual((await sql`select ${n}::int * 2 as doubled`.execute(conn)).rows, [{ doubled: n * 2 }]);
      assert.deepEqual((await sql`select 1 as one`.execute(conn)).rows, [{ one: 1 }]);
      const held = await prepared(conn);
      assert.equal(held.filter((text) => text === 'select $1::int * 2 as doubled').length, 1);
      assert.ok(!held.includes('select 1 as one'));
    });
  });

  test('rows come out whole, typed and apart at every run, their columns parsed by what the first run built', async () => {
    const db = await open();
    await onOneConnection(db, async (conn) => {
      const read = (n: number, doc: object, flag: boolean) =>
        sql<{ n: number; at: Date; doc: object; nothing: null; flag: boolean; big: number }>`
          select ${n}::int as n, timestamptz '2026-11-27 01:02:03.456+00' + make_interval(secs => ${n}) as at,
                 ${JSON.stringify(doc)}::jsonb as doc, null::text as nothing, ${flag}::bool as flag, ${n}::bigint * 1000 as big`.execute(
          conn,
        );
      const before = { ...rowShapeCounts };
      const runs = [];
      for (const n of [1, 2, 3]) runs.push((await read(n, { n, list: [n] }, n % 2 === 0)).rows);
      assert.deepEqual(
        rowShapeCounts,
        { built: before.built + 1, kept: before.kept + 2, ownParser: before.ownParser + 2 },
        'the shape is built by the first run only; later runs parse rows with a parser of their own',
      );
      for (const [i, rows] of runs.entries()) {
        const n = i + 1;
        assert.deepEqual(rows, [
          {
            n,
            at: new Date(Date.UTC(2026, 10, 27, 1, 2, 3 + n, 456)),
            doc: { n, list: [n] },
            nothing: null,
            flag: n % 2 === 0,
            big: n * 1000,
          },
        ]);
        assert.deepEqual(Object.keys(rows[0] ?? {}), ['n', 'at', 'doc', 'nothing', 'flag', 'big'], 'the columns in their order');
      }
      (runs[0]?.[0] as { n: number }).n = 99;
      assert.equal(runs[1]?.[0]?.n, 2, 'each row is an object of its own');
      const again = (await read(4, {}, true)).rows[0];
      assert.equal(again?.n, 4);
      assert.equal(Object.getPrototypeOf(again), Object.prototype, 'a plain object, as pg answers');
    });
  });

  test('later runs of a statement ask PostgreSQL for no description of its columns, and answer as the first did', async () => {
    const client = await preparedClient();
    try {
      let descriptions = 0;
      (client as unknown as { connection: EventEmitter }).connection.on('rowDescription', () => descriptions++);
      const read = 'select $1::int as n, now() as at, $2::jsonb as doc';
      for (const n of [1, 2, 3]) {
        const { rows, rowCount, command } = await client.query(read, [n, JSON.stringify({ list: [n] })]);
        assert.equal(rows.length, 1);
        assert.equal(rows[0].n, n);
        assert.ok(rows[0].at instanceof Date);
        assert.deepEqual(rows[0].doc, { list: [n] });
        assert.deepEqual([rowCount, command], [1, 'SELECT']);
      }
      assert.equal(descriptions, 1, 'described at the first run only');
      // No rows: an empty list and its count, at every run.
      for (const n of [1, 2]) assert.deepEqual((await client.query('select $1::int as n where false', [n])).rows, []);
      // A failing run of a known statement reaches its caller, and the connection goes on.
      const divide = 'select 10 / $1::int as q';
      assert.deepEqual((await client.query(divide, [2])).rows, [{ q: 5 }]);
      await assert.rejects(client.query(divide, [0]), /division by zero/);
      assert.deepEqual((await client.query(divide, [5])).rows, [{ q: 2 }]);
      assert.deepEqual((await client.query(read, [4, '{}'])).rows[0]?.n, 4);
    } finally {
      await client.end();
    }
  });

  test('the statements made in one turn of the event loop leave together at its end, and each answers its own caller', async () => {
    const clients = [await preparedClient(), await preparedClient()];
    try {
      const sockets = clients.map((client) => (client as unknown as { connection: { stream: Socket } }).connection.stream);
      const answers = clients.map((client, i) => client.query('select $1::int + 1 as next', [i]));
      // Made, and not sent yet: both wait in their sockets, held there until the end of this turn.
      assert.deepEqual(
        sockets.map((socket) => [socket.writableCorked, socket.writableLength > 0]),
        [
          [1, true],
          [1, true],
        ],
      );
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(
        sockets.map((socket) => [socket.writableCorked, socket.writableLength]),
        [
          [0, 0],
          [0, 0],
        ],
        'sent',
      );
      assert.deepEqual(
        (await Promise.all(answers)).map((result) => result.rows),
        [[{ next: 1 }], [{ next: 2 }]],
      );
      // A statement that fails still leaves, and the next one on its connection too.
      const client = clients[0] as pg.Client;
      await assert.rejects(client.query('select 1 / $1::int as q', [0]), /division by zero/);
      assert.deepEqual((await client.query('select 1 / $1::int as q', [1])).rows, [{ q: 1 }]);
    } finally {
      for (const client of clients) await client.end();
    }
  });

  test('a text whose columns changed is built again, and its rows have the new columns', async () => {
    const db = await open();
    await sql`create table reshaped (id int primary key, a int)`.execute(db);
    await sql`insert into reshaped values (1, 10)`.execute(db);
    await onOneConnection(db, async (conn) => {
      const read = () => sql`select * from reshaped where id = ${1}`.execute(conn);
      assert.deepEqual((await read()).rows, [{ id: 1, a: 10 }]);
      await sql`alter table reshaped alter column a type text`.execute(db);
      const built = rowShapeCounts.built;
      assert.deepEqual((await read()).rows, [{ id: 1, a: '10' }], 'the new type, parsed as the new type');
      assert.equal(rowShapeCounts.built, built + 1);
    });
  });

  test('a connection keeps at most TENANTRY_DATABASE_STATEMENT_CACHE statements, the least recently used deallocated', async () => {
    const db = await open(4);
    await onOneConnection(db, async (conn) => {
      const texts = Array.from({ length: 7 }, (_, i) => i);
      for (const i of texts) assert.deepEqual((await sql`select ${1}::int + ${sql.lit(i)} as v`.execute(conn)).rows, [{ v: 1 + i }]);
      const held = await prepared(conn);
      assert.equal(held.length, 4, held.join(' | '));
      assert.ok(held.includes('select $1::int + 6 as v') && !held.includes('select $1::int + 0 as v'));
      assert.deepEqual((await sql`select ${5}::int + 0 as v`.execute(conn)).rows, [{ v: 5 }], 'a deallocated text is prepared again');
    });
  });

  test('0 prepares nothing', async () => {
    const db = await open(0);
    await onOneConnection(db, async (conn) => {
      assert.deepEqual((await sql`select ${2}::int as two`.execute(conn)).rows, [{ two: 2 }]);
      assert.deepEqual(await prepared(conn), []);
    });
  });

  test('a table that changed shape: prepared again outside a transaction; inside one a retryable unavailability, then fine', async () => {
    const db = await open();
    await sql`create table shapes (id int primary key)`.execute(db);
    await sql`insert into shapes values (1)`.execute(db);
    await onOneConnection(db, async (conn) => {
      const read = () => sql`select * from shapes where id = ${1}`.execute(conn);
      assert.deepEqual((await read()).rows, [{ id: 1 }]);
      await sql`alter table shapes add column label text`.execute(db);
      assert.deepEqual((await read()).rows, [{ id: 1, label: null }], 'outside a transaction: answered in the new shape');
      await sql`alter table shapes add column size int`.execute(db);
      await sql`begin`.execute(conn);
      const error = await read().then(
        () => undefined,
        (e: unknown) => e,
      );
      await sql`rollback`.execute(conn);
      assert.ok(isChangedShape(error), String(error));
      assert.ok(isDatabaseUnavailable(error), 'a request answers 503 with Retry-After, not 500');
      assert.deepEqual((await read()).rows, [{ id: 1, label: null, size: null }], 'the next try runs in the new shape');
    });
  });
});

test('the statement cache forgets the least recently used text: a use counts as much as the preparing', () => {
  const texts = new PreparedTexts<string>(3);
  for (const text of ['a', 'b', 'c']) assert.equal(texts.add(text, `${text}-statement`), undefined);
  assert.equal(texts.use('a'), 'a-statement');
  assert.equal(texts.add('d', 'd-statement'), 'b-statement', 'b was used longest ago');
  assert.equal(texts.use('b'), undefined);
  assert.equal(texts.use('c'), 'c-statement');
  assert.equal(texts.add('e', 'e-statement'), 'a-statement');
  assert.deepEqual(
    ['c', 'd', 'e'].map((text) => texts.use(text)),
    ['c-statement', 'd-statement', 'e-statement'],
  );
  assert.equal(texts.remove('d'), 'd-statement');
  assert.equal(texts.add('f', 'f-statement'), undefined, 'room again after a removal');
});

/** `pg`'s own parsing of a row: its `Result` given the columns' description, as a query's is. */
function pgParse(fields: pg.FieldDef[], rowData: unknown[]) {
  const result = (
    new pg.Query('') as unknown as { _result: { addFields(f: pg.FieldDef[]): void; parseRow(d: unknown[]): object; _parsers: [] } }
  )._result;
  result.addFields(fields);
  return { row: result.parseRow(rowData), parsers: result._parsers };
}

const column = (name: string, dataTypeID: number, format = 'text') =>
  ({ name, dataTypeID, format, tableID: 0, columnID: 0, dataTypeSize: -1, dataTypeModifier: -1 }) as pg.FieldDef;

test("a statement's own row parser answers what pg's parseRow does, names of any spelling and repeated names included", () => {
  const fields = [
    column('id', 25),
    column('n', 23),
    column('doc', 3802),
    column('at', 1184),
    column('flag', 16),
    column('n', 20),
    column('gone', 23),
    column('we"ird\\\n\u2028name', 25),
    column('constructor', 25),
    column('toString', 23),
  ];
  const rowData = ['cus_1', '7', '{"a":[1,{"b":null}]}', '2026-11-27 01:02:03.456+00', 't', '9000', null, 'x', 'y', '3'];
  const { row: expected, parsers } = pgParse(fields, rowData);
  const parseRow = compileRowParser(fields, parsers);
  assert.ok(parseRow);
  const row = parseRow(rowData);
  assert.deepEqual(row, expected);
  assert.deepEqual(row, {
    id: 'cus_1',
    n: 9000,
    doc: { a: [1, { b: null }] },
    at: new Date(Date.UTC(2026, 10, 27, 1, 2, 3, 456)),
    flag: true,
    gone: null,
    'we"ird\\\n\u2028name': 'x',
    constructor: 'y',
    toString: 3,
  });
  assert.deepEqual(Object.keys(row), Object.keys(expected), 'the same columns in the same order: a repeated name keeps its first place');
  assert.equal(Object.getPrototypeOf(row), Object.prototype);
  assert.notEqual(parseRow(rowData), row, 'a new object for every row');
});

test('a column named __proto__ or sent in binary is left to pg: no parser of its own', () => {
  const proto = [column('id', 25), column('__proto__', 25)];
  assert.equal(compileRowParser(proto, pgParse(proto, ['a', 'b']).parsers), undefined);
  const binary = [column('id', 25), column('blob', 17, 'binary')];
  assert.equal(compileRowParser(binary, pgParse(binary, ['a', null]).parsers), undefined);
});
