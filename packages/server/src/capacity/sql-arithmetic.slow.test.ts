import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { sql } from 'kysely';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { assertPoolFits } from './checks.ts';
import { add, type Resources, ZERO } from './resources.ts';

/**
 * The capacity arithmetic a create runs in SQL (migration 0038) is the arithmetic of
 * resources.ts: the allocation it writes is `add`'s, and it lets a quota into a pool exactly when
 * `assertPoolFits` (nothing held before) does.
 */
const profile = fc.constantFrom('a100-40gb', 'h100-80gb', 'l4-24gb');
const amount = fc.integer({ min: 0, max: 2_000 });
const resources: fc.Arbitrary<Resources> = fc.record({
  vcpu: amount,
  memory_gib: amount,
  storage_gib: amount,
  gpus: fc.dictionary(profile, fc.integer({ min: 0, max: 16 })),
});

for (const target of testDatabases()) {
  describe(`capacity arithmetic in SQL [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    const inSql = async (pool: Resources, allocated: Resources, wanted: Resources) => {
      const { rows } = await sql<{ sum: Resources; fits: boolean }>`
        select resources_add(${JSON.stringify(allocated)}::jsonb, ${JSON.stringify(wanted)}::jsonb) as sum,
               resources_fit(${JSON.stringify(pool)}::jsonb, ${JSON.stringify(allocated)}::jsonb, ${JSON.stringify(wanted)}::jsonb) as fits`.execute(
        server.database.db,
      );
      return rows[0] as { sum: Resources; fits: boolean };
    };
    const fitsInTs = (pool: Resources, allocated: Resources, wanted: Resources) => {
      try {
        assertPoolFits(pool, allocated, ZERO, wanted);
        return true;
      } catch {
        return false;
      }
    };

    test('the sum and the fit agree with resources.ts, zero GPU entries dropped, profiles missing from the pool at zero', async () => {
      const pool: Resources = { vcpu: 10, memory_gib: 40, storage_gib: 100, gpus: { 'l4-24gb': 2 } };
      const held: Resources = { vcpu: 8, memory_gib: 0, storage_gib: 100, gpus: { 'l4-24gb': 1 } };
      assert.deepEqual(await inSql(pool, held, { vcpu: 2, memory_gib: 40, storage_gib: 0, gpus: { 'l4-24gb': 1 } }), {
        sum: { vcpu: 10, memory_gib: 40, storage_gib: 100, gpus: { 'l4-24gb': 2 } },
        fits: true,
      });
      // One vCPU too many; a GPU profile the pool does not have; storage the pool has no room for.
      assert.equal((await inSql(pool, held, { vcpu: 3, memory_gib: 0, storage_gib: 0, gpus: {} })).fits, false);
      assert.equal((await inSql(pool, held, { vcpu: 0, memory_gib: 0, storage_gib: 0, gpus: { 'a100-40gb': 1 } })).fits, false);
      assert.equal((await inSql(pool, held, { vcpu: 0, memory_gib: 0, storage_gib: 1, gpus: {} })).fits, false);
      // A dimension at zero is not asked for, even where the pool is already over-allocated.
      const over = { ...held, vcpu: 12 };
      assert.equal((await inSql(pool, over, { vcpu: 0, memory_gib: 1, storage_gib: 0, gpus: { 'a100-40gb': 0 } })).fits, true);
      assert.deepEqual((await inSql(pool, held, { ...ZERO, gpus: { 'l4-24gb': 0 } })).sum.gpus, { 'l4-24gb': 1 });
    });

    test('for any pool, allocation and quota', async () => {
      await fc.assert(
        fc.asyncProperty(resources, resources, resources, async (pool, allocated, wanted) => {
          const answer = await inSql(pool, allocated, wanted);
          assert.deepEqual(answer.sum, add(allocated, wanted));
          assert.equal(answer.fits, fitsInTs(pool, allocated, wanted));
        }),
        { numRuns: 200 },
      );
    });
  });
}
