import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createServerDatabase, dropServerDatabase, SERVER_DATABASE_URL } from '../../../test/harness.ts';
import { isDatabaseUnavailable } from './database.ts';

/**
 * Which errors of a real PostgreSQL server a request answers 503 UNAVAILABLE with Retry-After (a
 * moment a retry may outlast) rather than 500: a statement past `statement_timeout`, a lock not had
 * within `lock_timeout`; never a statement that is wrong.
 */
describe('errors that mean the database is unavailable for a moment', {
  skip: SERVER_DATABASE_URL ? false : 'TENANTRY_TEST_DATABASE_URL is not set',
}, () => {
  let url = '';
  const clients: pg.Client[] = [];
  const client = async () => {
    const connected = new pg.Client({ connectionString: url });
    await connected.connect();
    clients.push(connected);
    return connected;
  };
  const failure = (run: Promise<unknown>) =>
    run.then(
      () => assert.fail('the statement succeeded'),
      (error: unknown) => error,
    );
  before(async () => {
    url = await createServerDatabase();
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.end()));
    await dropServerDatabase(url);
  });

  test('a statement cancelled by statement_timeout', async () => {
    const session = await client();
    await session.query('set statement_timeout = 50');
    const error = await failure(session.query('select pg_sleep(2)'));
    assert.equal((error as { code?: string }).code, '57014');
    assert.ok(isDatabaseUnavailable(error));
  });

  test('a lock not had within lock_timeout', async () => {
    const holder = await client();
    const waiter = await client();
    await holder.query('create table held (id int primary key)');
    await holder.query('begin');
    await holder.query('lock table held in access exclusive mode');
    await waiter.query('set lock_timeout = 50');
    const error = await failure(waiter.query('select * from held'));
    await holder.query('rollback');
    assert.equal((error as { code?: string }).code, '55P03');
    assert.ok(isDatabaseUnavailable(error));
  });

  test('a wrong statement or a broken constraint is not', async () => {
    const session = await client();
    assert.equal(isDatabaseUnavailable(await failure(session.query('select * from no_such_table'))), false);
    await session.query('create table once (id int primary key)');
    await session.query('insert into once values (1)');
    assert.equal(isDatabaseUnavailable(await failure(session.query('insert into once values (1)'))), false);
  });
});
