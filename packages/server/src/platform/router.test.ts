import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { migrate, openAppDatabase } from '../app/database.ts';
import type { Platform } from './platform.ts';
import { PlatformCallInTransactionError, platformRouter } from './router.ts';
import { SandboxPlatform } from './sandbox/sandbox-platform.ts';

describe('the platform router', () => {
  test('test mode goes to the sandbox, live mode to the configured driver', async () => {
    const calls: string[] = [];
    const recorder = (name: string) =>
      new Proxy({} as Platform, {
        get: (_target, property) =>
          property === 'name'
            ? name
            : async () => {
                calls.push(`${name}.${String(property)}`);
                return { vms: [], databases: [], gpus: {}, running: true };
              },
      });
    const router = platformRouter({ live: recorder('kubernetes'), test: recorder('sandbox') });
    const org = { customerId: 'c', organization: 'p-c' };
    await router.listWorkloads({ partnerId: 'p', mode: 'live', now: new Date() }, org);
    await router.listWorkloads({ partnerId: 'p', mode: 'test', now: new Date() }, org);
    assert.deepEqual(calls, ['kubernetes.listWorkloads', 'sandbox.listWorkloads']);
  });

  test('a platform call made with a database transaction open fails, and names the rule', async () => {
    const database = await openAppDatabase({ kind: 'embedded', dataDir: undefined });
    try {
      await migrate(database.db);
      const sandbox = new SandboxPlatform({ db: database.db, delayMs: 0 });
      const router = platformRouter({ live: sandbox, test: sandbox });
      const ctx = { partnerId: 'p', mode: 'live' as const, now: new Date() };
      const org = { customerId: 'c', organization: 'p-c' };
      await assert.rejects(
        database.db.transaction().execute(async () => router.listWorkloads(ctx, org)),
        (error: unknown) => error instanceof PlatformCallInTransactionError && /transaction open/.test(error.message),
      );
      // Nested awaits inside the transaction are caught too.
      await assert.rejects(
        database.db.transaction().execute(async (trx) => {
          await trx.selectFrom('customers').select('uid').execute();
          await Promise.resolve();
          return router.stopWorkloads(ctx, org);
        }),
        PlatformCallInTransactionError,
      );
      // Before and after a transaction, the same call is fine.
      assert.deepEqual((await router.listWorkloads(ctx, org)).vms, []);
      await database.db.transaction().execute(async (trx) => trx.selectFrom('customers').select('uid').execute());
      assert.deepEqual((await router.listWorkloads(ctx, org)).vms, []);
    } finally {
      await database.close();
    }
  });
});
