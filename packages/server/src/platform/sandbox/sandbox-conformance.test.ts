import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createServerDatabase, dropServerDatabase, testDatabases } from '../../../test/harness.ts';
import { migrate, openAppDatabase } from '../../app/database.ts';
import { platformConformance } from '../conformance.ts';
import type { AddressRange, PlatformContext, ProjectRef } from '../platform.ts';
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

/** The allocator's one-statement path and its locked path together, under concurrent looks. */
for (const target of testDatabases()) {
  describe(`sandbox address ranges under concurrent allocators [${target.name}]`, () => {
    let url: string | undefined;
    let database: Awaited<ReturnType<typeof openAppDatabase>>;
    let sandbox: SandboxPlatform;
    const ctx: PlatformContext = { partnerId: 'ranges', mode: 'live', now: new Date(Date.UTC(2026, 10, 25)) };
    const project = (name: string): ProjectRef => ({
      customerId: 'c1',
      organization: 'org-c1',
      project: name,
      namespace: `org-c1-${name}`,
    });
    const cidrOf = (range: AddressRange) => (range.state === 'done' ? range.cidr : range.state);

    before(async () => {
      url = target.name === 'postgres' ? await createServerDatabase() : undefined;
      database = await openAppDatabase(url ? { kind: 'postgres', url } : { kind: 'embedded', dataDir: undefined });
      await migrate(database.db);
      sandbox = new SandboxPlatform({ db: database.db, delayMs: 0, addressRanges: 16 });
    });
    after(async () => {
      await database.close();
      if (url) await dropServerDatabase(url);
    });

    test('namespaces asking at once get distinct ranges, in order from the bottom of the pool', async () => {
      const names = Array.from({ length: 12 }, (_, i) => `p${i}`);
      const ranges = await Promise.all(names.map((name) => sandbox.reserveAddressRange(ctx, project(name))));
      const cidrs = ranges.map(cidrOf);
      assert.equal(new Set(cidrs).size, 12, cidrs.join(' '));
      assert.deepEqual(
        [...cidrs].sort((a, b) => Number(a.split('.')[2]) - Number(b.split('.')[2])),
        Array.from({ length: 12 }, (_, i) => `10.0.${i}.0/24`),
      );
    });

    test('one namespace asking several times at once keeps one range', async () => {
      const ranges = await Promise.all(Array.from({ length: 6 }, () => sandbox.reserveAddressRange(ctx, project('same'))));
      assert.equal(new Set(ranges.map(cidrOf)).size, 1);
      assert.equal((await sandbox.reserveAddressRange(ctx, project('same'))).state, 'done');
      assert.equal(cidrOf(await sandbox.reserveAddressRange(ctx, project('same'))), cidrOf(ranges[0] as AddressRange));
    });
  });
}
