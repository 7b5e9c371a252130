import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { partnerApi } from '../../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../../test/provisioning.ts';

/**
 * partner-api.md, Lists and pagination, rule 3: "concurrent creations and
 * deletions do not cause skips or repeats". For random page sizes and random
 * changes made while the walk runs (each page request races a batch of
 * creations and deletions), every list is walked to its end and checked:
 * strictly in list order (so nothing twice), every page but the last full,
 * and every item that existed throughout the walk seen exactly once.
 */
interface Page {
  keys: string[];
  next: string | null;
  limit: number;
}

type Change = { kind: 'create'; n: number } | { kind: 'delete'; pick: number };

const changeArb = fc.oneof(
  fc.record({ kind: fc.constant('create' as const), n: fc.nat(1_000_000) }),
  fc.record({ kind: fc.constant('delete' as const), pick: fc.nat(1_000) }),
);
interface Scenario {
  seed: number;
  limit: number;
  changes: Change[][];
}

const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  seed: fc.integer({ min: 3, max: 14 }),
  limit: fc.integer({ min: 1, max: 5 }),
  changes: fc.array(fc.array(changeArb, { maxLength: 3 }), { maxLength: 8 }),
});

interface ListUnderTest {
  /** Creates an item; its sort key. */
  create(n: number): Promise<string>;
  /** Deletes (or starts deleting) an item. */
  remove(key: string): Promise<void>;
  page(cursor: string | null, limit: number): Promise<Page>;
  /** true for newest-first lists. */
  descending?: boolean;
}

async function walkUnderChanges(list: ListUnderTest, scenario: Scenario): Promise<void> {
  const initial: string[] = [];
  for (let i = 0; i < scenario.seed; i++) initial.push(await list.create(i));
  const removed = new Set<string>();
  const alive = [...initial];
  const applyBatch = async (batch: Change[]) => {
    for (const change of batch) {
      if (change.kind === 'create') await list.create(1000 + change.n);
      else if (alive.length > 0) {
        const [victim] = alive.splice(change.pick % alive.length, 1);
        if (victim !== undefined) {
          removed.add(victim);
          await list.remove(victim);
        }
      }
    }
  };
  const seen: string[] = [];
  let cursor: string | null = null;
  let step = 0;
  for (;;) {
    const [page]: [Page, unknown] = await Promise.all([list.page(cursor, scenario.limit), applyBatch(scenario.changes[step] ?? [])]);
    step++;
    assert.equal(page.limit, scenario.limit);
    if (page.next !== null) assert.equal(page.keys.length, scenario.limit, 'every page but the last is full');
    seen.push(...page.keys);
    if (page.next === null) break;
    cursor = page.next;
    assert.ok(step < 500, 'the walk ends');
  }
  for (let i = 1; i < seen.length; i++) {
    const [a, b] = [seen[i - 1] ?? '', seen[i] ?? ''];
    assert.ok(list.descending ? a > b : a < b, `list order holds: ${a} then ${b} in ${seen.join(',')}`);
  }
  for (const key of initial) {
    if (!removed.has(key)) assert.ok(seen.includes(key), `${key} existed throughout the walk and was seen`);
  }
}

for (const target of testDatabases()) {
  describe(`pagination under concurrent changes (property) [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    let run = 0;
    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'walker', {
        limits: {
          max_customers: 0,
          max_projects_per_customer: 10_000,
          max_open_operations: 10_000,
          rate_limit_per_minute: 1_000_000,
          rate_limit_burst: 100_000,
        },
      });
    });
    after(() => server.stop());

    const pageOf = async (
      path: string,
      key: (item: Record<string, unknown>) => string,
      cursor: string | null,
      limit: number,
    ): Promise<Page> => {
      const separator = path.includes('?') ? '&' : '?';
      const query = `${separator}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const result = await partnerApi<{ data: Record<string, unknown>[]; pagination: { next_cursor: string | null; limit: number } }>(
        server,
        'GET',
        `${path}${query}`,
        { token: p.test },
      );
      assert.equal(result.status, 200, result.text);
      return { keys: result.body.data.map(key), next: result.body.pagination.next_cursor, limit: result.body.pagination.limit };
    };

    test('customers (by id)', async () => {
      await fc.assert(
        fc.asyncProperty(scenarioArb, async (scenario) => {
          const prefix = `r${run++}`;
          // A fresh partner per run keeps each walk to its own customers.
          const own = await partnerWithModes(server, `walker-${prefix}`, {
            limits: { max_customers: 0, max_open_operations: 10_000, rate_limit_per_minute: 1_000_000, rate_limit_burst: 100_000 },
          });
          const token = own.test;
          await walkUnderChanges(
            {
              create: async (n) => {
                const id = `${prefix}-${String(n).padStart(7, '0')}`;
                const created = await partnerApi(server, 'POST', '/customers', {
                  token,
                  body: { id, owner: { username: 'o', email: `o@${id}.example` } },
                });
                assert.ok(created.status === 202 || created.status === 409, created.text);
                return id;
              },
              remove: async (id) => {
                const result = await partnerApi(server, 'DELETE', `/customers/${id}?mode=immediate`, { token });
                assert.ok(result.status === 202 || result.status === 409, result.text);
              },
              page: async (cursor, limit) => {
                const separator = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
                const result = await partnerApi<{ data: { id: string }[]; pagination: { next_cursor: string | null; limit: number } }>(
                  server,
                  'GET',
                  `/customers?limit=${limit}${separator}`,
                  { token },
                );
                assert.equal(result.status, 200, result.text);
                return {
                  keys: result.body.data.map((c) => c.id),
                  next: result.body.pagination.next_cursor,
                  limit: result.body.pagination.limit,
                };
              },
            },
            scenario,
          );
        }),
        { numRuns: 8 },
      );
    });

    test('projects (by name), users (by username) and operations (newest first) of one customer', async () => {
      await fc.assert(
        fc.asyncProperty(scenarioArb, fc.constantFrom('projects', 'users', 'operations'), async (scenario, which) => {
          const customer = `walk-${run++}`;
          await activeCustomer(server, p.test, customer);
          const base = `/customers/${customer}`;
          if (which === 'projects') {
            await walkUnderChanges(
              {
                create: async (n) => {
                  const name = `p${String(n).padStart(7, '0')}`;
                  const result = await partnerApi(server, 'POST', `${base}/projects`, { token: p.test, body: { name } });
                  assert.ok(result.status === 202 || result.status === 409, result.text);
                  return name;
                },
                remove: async (name) => {
                  // A project still provisioning cannot be deleted yet (NOT_READY); it stays, which the check allows.
                  const result = await partnerApi(server, 'DELETE', `${base}/projects/${name}`, { token: p.test });
                  assert.ok([202, 404, 409].includes(result.status), result.text);
                },
                page: (cursor, limit) => pageOf(`${base}/projects`, (x) => String(x.name), cursor, limit),
              },
              scenario,
            );
          } else if (which === 'users') {
            await walkUnderChanges(
              {
                create: async (n) => {
                  const username = `u${String(n).padStart(7, '0')}`;
                  const result = await partnerApi(server, 'POST', `${base}/users`, {
                    token: p.test,
                    body: { username, email: `${username}@${customer}.example` },
                  });
                  assert.ok(result.status === 201 || result.status === 409, result.text);
                  return username;
                },
                remove: async (username) => {
                  const result = await partnerApi(server, 'DELETE', `${base}/users/${username}`, { token: p.test });
                  assert.ok([200, 404].includes(result.status), result.text);
                },
                page: (cursor, limit) => pageOf(`${base}/users`, (x) => String(x.username), cursor, limit),
              },
              scenario,
            );
          } else {
            await walkUnderChanges(
              {
                descending: true,
                // Two changes may carry the same n: each project gets a name of its own.
                create: (n) => createCustomerProject(base, `o${n}-${run}-${created++}`),
                // Operations are never deleted by a partner; only creations race this walk.
                remove: async () => {},
                page: (cursor, limit) => pageOf(`${base}/operations`, (x) => String(x.id), cursor, limit),
              },
              scenario,
            );
          }
        }),
        { numRuns: 12 },
      );
    });

    let created = 0;
    async function createCustomerProject(base: string, name: string): Promise<string> {
      const result = await partnerApi<{ data: { operation: { id: string } } }>(server, 'POST', `${base}/projects`, {
        token: p.test,
        body: { name },
      });
      assert.equal(result.status, 202, result.text);
      return result.body.data.operation.id;
    }
  });
}
