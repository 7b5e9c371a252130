import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { testDatabases } from '../../../test/harness.ts';
import { type DatabaseHandle, retryOnDeadlock, uniqueViolation } from './database.ts';
import { afterCommit, inTransaction } from './transactions.ts';

for (const target of testDatabases()) {
  describe(`transactions (${target.name})`, () => {
    let handle: DatabaseHandle;
    let drop: () => Promise<void>;
    before(async () => {
      const created = await target.create();
      drop = created.drop;
      handle = created.handle as unknown as DatabaseHandle;
      await sql`create table marks (id text primary key)`.execute(handle.db);
    });
    after(() => drop?.());

    test('inside a transaction, and only there, code knows it is inside one', async () => {
      assert.equal(inTransaction(), false);
      await handle.db.transaction().execute(async () => {
        await new Promise((resolve) => setImmediate(resolve));
        assert.equal(inTransaction(), true);
      });
      assert.equal(inTransaction(), false);
    });

    test('afterCommit runs once the commit is done: what it reads is there', async () => {
      let seen: unknown[] | undefined;
      await handle.db.transaction().execute(async (trx) => {
        await sql`insert into marks values ('committed')`.execute(trx);
        afterCommit(() => {
          // Read through the pool, outside the transaction: only committed rows are visible here.
          void sql<{ id: string }>`select id from marks where id = 'committed'`.execute(handle.db).then((result) => {
            seen = result.rows;
          });
        });
        assert.equal(seen, undefined, 'nothing runs before the commit');
      });
      for (let i = 0; i < 100 && seen === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.deepEqual(seen, [{ id: 'committed' }]);
    });

    test('afterCommit never runs for a transaction that rolls back', async () => {
      let ran = false;
      await assert.rejects(
        handle.db.transaction().execute(async (trx) => {
          await sql`insert into marks values ('rolled-back')`.execute(trx);
          afterCommit(() => {
            ran = true;
          });
          throw new Error('refused');
        }),
        /refused/,
      );
      // The callback would have run synchronously after the commit, before execute() settled.
      assert.equal(ran, false);
    });

    test('one callback asked for twice in a transaction runs once after its commit', async () => {
      let runs = 0;
      const count = () => {
        runs++;
      };
      await handle.db.transaction().execute(async () => {
        afterCommit(count);
        afterCommit(count);
      });
      assert.equal(runs, 1);
    });

    test('outside a transaction, afterCommit runs soon', async () => {
      const ran = await new Promise<boolean>((resolve) => afterCommit(() => resolve(true)));
      assert.equal(ran, true);
    });

    // One connection cannot deadlock with itself: PostgreSQL only.
    if (target.name === 'postgres')
      test('retryOnDeadlock: the transaction PostgreSQL aborts to break a deadlock runs once more, and sees the other commit', async () => {
        await sql`create table deadlock_locks (id text primary key)`.execute(handle.db);
        await sql`insert into deadlock_locks values ('partner')`.execute(handle.db);
        let inserted!: () => void;
        const firstInserted = new Promise<void>((resolve) => {
          inserted = resolve;
        });
        let locked!: () => void;
        const otherLocked = new Promise<void>((resolve) => {
          locked = resolve;
        });
        let runs = 0;
        // Only the first transaction may look for the cycle: the other waits a minute before it would.
        // The cycle is complete before the first starts to wait, so its one check, 50 ms later, always
        // finds it, however slow the machine (a check that ran before the other waited found nothing,
        // and then the other's own check, a second later, aborted the other instead).
        const waitingForLock = async () => {
          for (;;) {
            const waiting = await sql<{ n: number }>`
            select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(
              handle.db,
            );
            if ((waiting.rows[0]?.n ?? 0) > 0) return;
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        };
        // The other transaction: takes the shared lock, then writes the row the first one wrote, and waits for the first.
        const other = handle.db.transaction().execute(async (trx) => {
          await sql`set local deadlock_timeout = '1min'`.execute(trx);
          await firstInserted;
          await sql`select id from deadlock_locks where id = 'partner' for update`.execute(trx);
          locked();
          await sql`insert into marks values ('deadlocked')`.execute(trx);
        });
        const first = retryOnDeadlock(() =>
          handle.db.transaction().execute(async (trx) => {
            runs++;
            await sql`set local deadlock_timeout = '50ms'`.execute(trx);
            await sql`insert into marks values ('deadlocked')`.execute(trx);
            if (runs === 1) {
              inserted();
              await otherLocked;
              // The other now waits for this insert; asking for its lock closes the cycle.
              await waitingForLock();
            }
            await sql`select id from deadlock_locks where id = 'partner' for update`.execute(trx);
          }),
        );
        const [firstResult, otherResult] = await Promise.allSettled([first, other]);
        assert.equal(otherResult.status, 'fulfilled');
        assert.equal(runs, 2, 'ran again after the deadlock');
        // The second run sees the row the other committed: here a unique violation, which a create explains.
        assert.equal(firstResult.status, 'rejected');
        assert.equal(uniqueViolation((firstResult as PromiseRejectedResult).reason), 'marks_pkey');
      });
  });
}
