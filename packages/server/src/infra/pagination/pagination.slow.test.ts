import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { sql } from 'kysely';
import { assertError, partnerApi, partnerWithToken } from '../../../test/client.ts';
import { fixtureRoutes } from '../../../test/fixtures.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';

interface ItemsPage {
  data: { name: string; color: string }[];
  pagination: { next_cursor: string | null; limit: number };
}

for (const target of testDatabases()) {
  describe(`pagination [${target.name}]`, () => {
    let server: TestServer;
    let token: string;
    const insert = async (names: string[], color = 'red') => {
      for (const name of names) {
        await sql`insert into fixture_items values ('pages', 'live', ${name}, ${color}) on conflict do nothing`.execute(server.database.db);
      }
    };
    const page = (query: string) => partnerApi<ItemsPage>(server, 'GET', `/test-fixtures/items${query}`, { token });

    before(async () => {
      server = await startTestServer(target, { partnerRoutes: [fixtureRoutes().routes] });
      ({ token } = await partnerWithToken(server, 'pages', {
        settings: { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 } },
      }));
    });
    after(() => server.stop());

    test('default limit 50; every page but the last is full; next_cursor is null exactly at the end', async () => {
      await insert(Array.from({ length: 120 }, (_, i) => `item-${String(i).padStart(3, '0')}`));
      const first = await page('');
      assert.equal(first.body.data.length, 50);
      assert.equal(first.body.pagination.limit, 50);
      const names: string[] = first.body.data.map((i) => i.name);
      let cursor = first.body.pagination.next_cursor;
      while (cursor) {
        const next = await page(`?cursor=${encodeURIComponent(cursor)}`);
        names.push(...next.body.data.map((i) => i.name));
        cursor = next.body.pagination.next_cursor;
        if (cursor) assert.equal(next.body.data.length, 50);
      }
      assert.equal(names.length, 120);
      assert.deepEqual(names, [...names].sort());
      // Exactly a multiple of the page size: the last full page already says null.
      const exact = await page('?limit=120');
      assert.equal(exact.body.data.length, 120);
      assert.equal(exact.body.pagination.next_cursor, null);
    });

    test('filters apply before paging', async () => {
      await insert(['blue-a', 'blue-b', 'blue-c'], 'blue');
      const first = await page('?color=blue&limit=2');
      assert.deepEqual(
        first.body.data.map((i) => i.name),
        ['blue-a', 'blue-b'],
      );
      const second = await page(`?color=blue&limit=2&cursor=${encodeURIComponent(first.body.pagination.next_cursor ?? '')}`);
      assert.deepEqual(
        second.body.data.map((i) => i.name),
        ['blue-c'],
      );
      assert.equal(second.body.pagination.next_cursor, null);
    });

    test('a cursor is refused on another list, with other filters, and when tampered with', async () => {
      const first = await page('?color=blue&limit=1');
      const cursor = encodeURIComponent(first.body.pagination.next_cursor ?? '');
      const other = await partnerApi(server, 'GET', `/test-fixtures/other-items?color=blue&limit=1&cursor=${cursor}`, { token });
      assert.match(JSON.stringify(assertError(other, 400, 'VALIDATION_ERROR').details), /another list/);
      assert.match(
        JSON.stringify(assertError(await page(`?color=red&limit=1&cursor=${cursor}`), 400, 'VALIDATION_ERROR').details),
        /other filters/,
      );
      const raw = first.body.pagination.next_cursor ?? '';
      const tampered = `${raw.slice(0, 5)}${raw[5] === 'A' ? 'B' : 'A'}${raw.slice(6)}`;
      assertError(await page(`?color=blue&limit=1&cursor=${encodeURIComponent(tampered)}`), 400, 'VALIDATION_ERROR');
      assertError(await page('?cursor=not-a-cursor'), 400, 'VALIDATION_ERROR');
    });

    test('property: walking under concurrent creations and deletions never skips or repeats a surviving item', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.uniqueArray(fc.stringMatching(/^[a-z]{1,6}$/), { minLength: 1, maxLength: 40 }),
          fc.integer({ min: 1, max: 7 }),
          fc.array(fc.tuple(fc.boolean(), fc.stringMatching(/^[a-z]{1,6}$/)), { maxLength: 12 }),
          async (initial, limit, churn) => {
            await sql`delete from fixture_items where partner_id = 'pages'`.execute(server.database.db);
            await insert(initial.map((n) => `p-${n}`));
            const seen: string[] = [];
            const deleted = new Set<string>();
            let cursor: string | null = null;
            let step = 0;
            do {
              const result: { body: ItemsPage } = await page(`?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
              seen.push(...result.body.data.map((i) => i.name));
              cursor = result.body.pagination.next_cursor;
              const change = churn[step++];
              if (change) {
                const [isDelete, name] = change;
                if (isDelete) {
                  const victim = `p-${initial[name.length % initial.length]}`;
                  deleted.add(victim);
                  await sql`delete from fixture_items where partner_id = 'pages' and name = ${victim}`.execute(server.database.db);
                } else {
                  await insert([`p-${name}`]);
                }
              }
            } while (cursor);
            assert.equal(new Set(seen).size, seen.length, 'no repeats');
            assert.deepEqual(seen, [...seen].sort(), 'in order');
            for (const name of initial.map((n) => `p-${n}`)) {
              if (!deleted.has(name)) assert.ok(seen.includes(name), `no skip: ${name}`);
            }
          },
        ),
        { numRuns: 25 },
      );
    });
  });
}
