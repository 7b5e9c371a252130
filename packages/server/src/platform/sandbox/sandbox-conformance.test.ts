import { createServerDatabase, dropServerDatabase, testDatabases } from '../../../test/harness.ts';
import { migrate, openAppDatabase } from '../../app/database.ts';
import { platformConformance } from '../conformance.ts';
import { SandboxPlatform } from './sandbox-platform.ts';

/** The sandbox passes the platform conformance suite, on both databases, on a simulated clock. */
for (const target of testDatabases()) {
  platformConformance(`sandbox [${target.name}]`, async () => {
    const url = target.name === 'postgres' ? await createServerDatabase() : undefined;
    const database = await openAppDatabase(url ? { kind: 'postgres', url } : { kind: 'embedded', dataDir: undefined });
    await migrate(database.db);
    const addressRanges = 32;
    const sandbox = new SandboxPlatform({ db: database.db, delayMs: 3000, addressRanges });
    let nowMs = Date.UTC(2026, 5, 1);
    const partnerId = 'conformance';
    const ctx = () => ({ partnerId, mode: 'test' as const, now: new Date(nowMs) });
    return {
      platform: sandbox,
      mode: 'test',
      partnerId,
      addressRanges,
      now: () => new Date(nowMs),
      wait: async (until) => {
        nowMs = Math.max(nowMs, until.getTime());
      },
      addWorkloads: async (org, workloads) => {
        await sandbox.setWorkloads(ctx(), org, { ...workloads, running: true });
      },
      setRequiredActions: (user, actions) => sandbox.setRequiredActions(ctx(), user, actions),
      failNext: (kind, code) =>
        sandbox.injectFailure(ctx(), { type: kind, code, message: null, customerId: null, project: null, count: 1 }),
      close: async () => {
        await database.close();
        if (url) await dropServerDatabase(url);
      },
    };
  });
}
