import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Kysely, sql } from 'kysely';
import { createServerDatabase, dropServerDatabase } from '../../../test/harness.ts';
import { type DatabaseHandle, openDatabase } from './database.ts';

const SERVER = process.env.TENANTRY_TEST_DATABASE_URL;

const setting = async (db: Kysely<unknown>) =>
  (await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(db)).rows[0]?.synchronous_commit;

/**
 * A server that answers a connection's startup as PgBouncer answers an `options` parameter it does
 * not track: a FATAL error (SQLSTATE 08P01), then the connection closes. A startup without the
 * setting gets another error, so the test sees the parameter was sent.
 */
async function refusingPooler(): Promise<{ url: string; server: Server }> {
  const server = createServer((socket) => {
    socket.once('data', (startup: Buffer) => {
      const asked = startup.includes('options\0-c synchronous_commit=off\0');
      const message = asked ? 'unsupported startup parameter in options: synchronous_commit' : 'no options in the startup message';
      const fields = Buffer.from(`SFATAL\0VFATAL\0C08P01\0M${message}\0\0`, 'utf8');
      const header = Buffer.alloc(5);
      header.write('E', 0);
      header.writeInt32BE(fields.length + 4, 1);
      socket.end(Buffer.concat([header, fields]));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return { url: `postgres://tenantry@127.0.0.1:${port}/tenantry`, server };
}

describe('a second handle whose commits do not wait for the disk', () => {
  test('the embedded database answers itself: one connection, nothing to gain', async () => {
    const handle = await openDatabase({ kind: 'embedded', dataDir: undefined });
    try {
      assert.equal(await handle.asynchronousCommit(), handle.db);
    } finally {
      await handle.close();
    }
  });

  test('a server that refuses the setting at connection (PgBouncer): the handle itself, and the reason', async () => {
    const pooler = await refusingPooler();
    const handle = await openDatabase({ kind: 'postgres', url: pooler.url });
    try {
      const reasons: string[] = [];
      assert.equal(await handle.asynchronousCommit((reason) => reasons.push(reason)), handle.db);
      assert.equal(reasons.length, 1);
      assert.match(reasons[0] ?? '', /first connection, asking for synchronous_commit=off, failed: unsupported startup parameter/);
      // Asked again: the same answer, without trying again.
      assert.equal(await handle.asynchronousCommit((reason) => reasons.push(reason)), handle.db);
      assert.equal(reasons.length, 1);
    } finally {
      await handle.close();
      pooler.server.close();
    }
  });

  describe('on a PostgreSQL server', { skip: !SERVER && 'needs TENANTRY_TEST_DATABASE_URL' }, () => {
    let url: string;
    let handle: DatabaseHandle;
    before(async () => {
      url = await createServerDatabase();
      // An `options` of the deployment's own stays (the setting is added to it), and its application name
      // is kept with the pool's mark after it.
      const withOptions = new URL(url);
      withOptions.searchParams.set('options', '-c statement_timeout=12345');
      withOptions.searchParams.set('application_name', 'tenantry-test');
      handle = await openDatabase({ kind: 'postgres', url: withOptions.toString() });
    });
    after(async () => {
      await handle?.close();
      await dropServerDatabase(url);
    });

    test('its sessions commit asynchronously, the handle’s own still wait; both see each other’s commits', async () => {
      const fellBack: string[] = [];
      const asynchronous = (await handle.asynchronousCommit((reason) => fellBack.push(reason))) as Kysely<unknown>;
      const durable = handle.db as Kysely<unknown>;
      assert.deepEqual(fellBack, []);
      assert.notEqual(asynchronous, durable);
      assert.equal(await setting(asynchronous), 'off');
      assert.equal(await setting(durable), 'on');
      const settingsOf = async (db: Kysely<unknown>) =>
        (
          await sql<{ name: string; timeout: string }>`
            select current_setting('application_name') as name, current_setting('statement_timeout') as timeout`.execute(db)
        ).rows[0];
      assert.deepEqual(await settingsOf(asynchronous), { name: 'tenantry-test (asynchronous commit)', timeout: '12345ms' });
      assert.deepEqual(await settingsOf(durable), { name: 'tenantry-test', timeout: '12345ms' });
      await sql`create table notes (id int primary key)`.execute(durable);
      await sql`insert into notes values (1)`.execute(asynchronous);
      assert.deepEqual((await sql`select id from notes`.execute(durable)).rows, [{ id: 1 }]);
      // One pool, made once.
      assert.equal(await handle.asynchronousCommit(), asynchronous);
    });

    test('a URL with its host in the query (as a socket directory is given), which WHATWG URL cannot read, works too', async () => {
      const parts = new URL(url);
      const queryHost = `postgres://${parts.username}@${parts.pathname}?host=${parts.hostname}&port=${parts.port || '5432'}`;
      assert.throws(() => new URL(queryHost));
      const other = await openDatabase({ kind: 'postgres', url: queryHost });
      try {
        const fellBack: string[] = [];
        const asynchronous = (await other.asynchronousCommit((reason) => fellBack.push(reason))) as Kysely<unknown>;
        assert.deepEqual(fellBack, []);
        assert.equal(await setting(asynchronous), 'off');
      } finally {
        await other.close();
      }
    });
  });
});
