import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { partnerApi } from '../../test/client.ts';
import { SERVER_DATABASE_URL, startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { customerBody, eventually, lockWaiters, partnerWithModes } from '../../test/provisioning.ts';

/**
 * Creates of a partner hold its row while they check and commit: a create that waits for the
 * row (another process holds it) is checked and counted once the lock is free, and one whose id was
 * taken meanwhile answers 409. PostgreSQL only: the lock is held here by a second connection, which the
 * embedded database does not have.
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

  test('while the partner’s row is locked, creates wait for it; then a new customer is counted and a taken id answers 409', async () => {
    const first = await partnerApi(server, 'POST', '/customers', { token, body: customerBody('first') });
    assert.equal(first.status, 202, first.text);

    await locker.query('begin');
    await locker.query(`select 1 from partners where id = 'locked' for update`);
    try {
      const waiting = partnerApi(server, 'POST', '/customers', { token, body: customerBody('second') });
      const clash = partnerApi<{ error: { code: string } }>(server, 'POST', '/customers', { token, body: customerBody('first') });
      // Released once a backend is seen waiting for the lock (pg_stat_activity does not show a waiting
      // statement's text, so any backend waiting for this lock counts).
      await eventually(
        () => lockWaiters(locker, 'client'),
        (waiters) => waiters >= 1,
      );
      await locker.query('commit');
      const second = await waiting;
      assert.equal(second.status, 202, second.text);
      const taken = await clash;
      assert.equal(taken.status, 409, taken.text);
      assert.equal(taken.body.error.code, 'ALREADY_EXISTS');
    } finally {
      await locker.query('rollback').catch(() => undefined);
    }

    const whoami = await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token });
    assert.equal(whoami.body.data.customer_count, 2);
  });
});
