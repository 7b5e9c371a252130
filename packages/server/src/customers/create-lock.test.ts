import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { partnerApi } from '../../test/client.ts';
import { SERVER_DATABASE_URL, startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { customerBody, eventually, lockWaiters, partnerWithModes } from '../../test/provisioning.ts';

/**
 * A create writes its rows before it waits for its partner's row, in the statement that then takes
 * that row's lock (decisions 223, 239, 241): a clash is answered without waiting for the partner's
 * other creates, and a create that waits is counted once the lock is free. PostgreSQL only: the lock is
 * held here by a second connection, which the embedded database does not have.
 */
describe('a create and its partner’s lock', { skip: SERVER_DATABASE_URL ? false : 'TENANTRY_TEST_DATABASE_URL is not set' }, () => {
  let server: TestServer;
  let token: string;
  let locker: pg.Client;
  before(async () => {
    const target = testDatabases().find((database) => database.name === 'postgres');
    assert.ok(target);
    server = await startTestServer(target);
    token = (await partnerWithModes(server, 'locked')).live;
    locker = new pg.Client({ connectionString: server.databaseUrl });
    await locker.connect();
  });
  after(async () => {
    await locker?.end();
    await server?.stop();
  });

  test('while the partner’s row is locked, a taken id answers 409 at once, and a new customer waits for the lock, then is counted', async () => {
    const first = await partnerApi(server, 'POST', '/customers', { token, body: customerBody('first') });
    assert.equal(first.status, 202, first.text);

    await locker.query('begin');
    await locker.query(`select 1 from partners where id = 'locked' for update`);
    try {
      // Answered while the lock is still held (the transaction above ends only below): had the create
      // waited for it, this call would not return.
      const clash = await partnerApi<{ error: { code: string } }>(server, 'POST', '/customers', {
        token,
        body: customerBody('first'),
        signal: AbortSignal.timeout(20_000),
      });
      assert.equal(clash.status, 409, clash.text);
      assert.equal(clash.body.error.code, 'ALREADY_EXISTS');

      // A new customer's create waits on the partner's row, its rows already written (uncommitted): the
      // lock is released once a backend is seen waiting for it (pg_stat_activity does not show a waiting
      // prepared statement's text, so any backend waiting for this lock counts).
      const waiting = partnerApi(server, 'POST', '/customers', { token, body: customerBody('second') });
      await eventually(
        () => lockWaiters(locker, 'client'),
        (waiting) => waiting >= 1,
      );
      await locker.query('commit');
      const second = await waiting;
      assert.equal(second.status, 202, second.text);
    } finally {
      await locker.query('rollback').catch(() => undefined);
    }

    const whoami = await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token });
    assert.equal(whoami.body.data.customer_count, 2);
  });
});
