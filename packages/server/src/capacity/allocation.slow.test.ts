import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { createPartner, exchange, issueKey, operatorApi, partnerApi } from '../../test/client.ts';
import {
  createServerDatabase,
  dropServerDatabase,
  SERVER_DATABASE_URL,
  startTestServer,
  type TestServer,
  testDatabases,
} from '../../test/harness.ts';
import { customerBody, eventually, partnerWithModes, waitGone } from '../../test/provisioning.ts';
import { type ServeProcess, spawnServe } from '../../test/serve-process.ts';

/**
 * The pool's books: `allocated` is always the sum of the customers' quotas, whatever partners do and
 * however many processes do it at once (partner-api.md, Behaviour of listed endpoints item 4).
 */
interface Amount {
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  gpus: Record<string, number>;
}
interface Dimension {
  total: number;
  allocated: number;
  available: number;
}
interface Pool {
  vcpu: Dimension;
  memory_gib: Dimension;
  storage_gib: Dimension;
}
interface Urls {
  partnerUrl: string;
  operatorUrl: string;
  operatorToken: string;
}

const amount = (vcpu: number, memory_gib: number, storage_gib: number): Amount => ({ vcpu, memory_gib, storage_gib, gpus: {} });

/** The pool as the partner sees it, and the sum of its customers' quotas read one by one. */
async function books(server: Urls, token: string): Promise<{ pool: Pool; sum: Amount; customers: number }> {
  const capacity = await partnerApi<{ data: { pool: Pool } }>(server, 'GET', '/capacity', { token });
  assert.equal(capacity.status, 200, capacity.text);
  const sum = amount(0, 0, 0);
  let customers = 0;
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
    const page = await partnerApi<{ data: { id: string }[]; pagination: { next_cursor: string | null } }>(
      server,
      'GET',
      `/customers?limit=100${query}`,
      { token },
    );
    assert.equal(page.status, 200, page.text);
    for (const customer of page.body.data) {
      const quota = await partnerApi<{ data: { quota: Amount } }>(server, 'GET', `/customers/${customer.id}/quota`, { token });
      assert.equal(quota.status, 200, quota.text);
      sum.vcpu += quota.body.data.quota.vcpu;
      sum.memory_gib += quota.body.data.quota.memory_gib;
      sum.storage_gib += quota.body.data.quota.storage_gib;
      customers++;
    }
    cursor = page.body.pagination.next_cursor;
  } while (cursor);
  return { pool: capacity.body.data.pool, sum, customers };
}

function assertBalanced(view: { pool: Pool; sum: Amount }): void {
  for (const dimension of ['vcpu', 'memory_gib', 'storage_gib'] as const) {
    const d = view.pool[dimension];
    assert.equal(d.allocated, view.sum[dimension], `${dimension}: allocated equals the sum of the customers' quotas`);
    assert.ok(d.allocated <= d.total, `${dimension}: allocated ${d.allocated} within the pool's ${d.total}`);
    assert.equal(d.available, d.total - d.allocated);
  }
}

type Step =
  | { kind: 'create'; plan: 'starter' | 'standard' | 'performance' }
  | { kind: 'quota'; pick: number; vcpu: number; memory: number; storage: number }
  | { kind: 'plan'; pick: number; plan: 'starter' | 'standard' | 'performance' }
  | { kind: 'delete'; pick: number; immediate: boolean };

const planArb = fc.constantFrom('starter' as const, 'standard' as const, 'performance' as const);
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('create' as const), plan: planArb }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('quota' as const),
      pick: fc.nat(100),
      vcpu: fc.integer({ min: 0, max: 24 }),
      memory: fc.integer({ min: 0, max: 96 }),
      storage: fc.integer({ min: 0, max: 400 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('plan' as const), pick: fc.nat(100), plan: planArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), pick: fc.nat(100), immediate: fc.boolean() }) },
);

for (const target of testDatabases()) {
  describe(`capacity books [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    test('property: after any creations, quota and plan changes and deletions, allocated equals the sum of the quotas', async () => {
      let run = 0;
      const seen = new Map<string, number>();
      const note = (what: string, status: number) => seen.set(`${what} ${status}`, (seen.get(`${what} ${status}`) ?? 0) + 1);
      await fc.assert(
        fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 14 }), async (steps) => {
          run++;
          // A small pool (16 vCPU, 64 GiB, 400 GiB), so creations and raises also meet PARTNER_CAPACITY_EXCEEDED.
          const p = await partnerWithModes(server, `books-${run}`);
          const capacity = await operatorApi(server, 'PUT', `/partners/${p.id}/capacity`, {
            body: { pool: { vcpu: 16, memory_gib: 64, storage_gib: 400 } },
          });
          assert.equal(capacity.status, 200, capacity.text);
          const live: string[] = [];
          let n = 0;
          let scheduled = 0;
          for (const step of steps) {
            const pick = 'pick' in step ? live[step.pick % Math.max(1, live.length)] : undefined;
            if (step.kind === 'create') {
              // Customer ids are unique across partners (they name the platform's organisations).
              const id = `b${run}-c${n++}`;
              const created = await partnerApi(server, 'POST', '/customers', {
                token: p.live,
                body: customerBody(id, { plan_id: step.plan }),
              });
              assert.ok([202, 409].includes(created.status), created.text);
              note('create', created.status);
              if (created.status === 202) {
                await eventually(
                  () => partnerApi<{ data: { status: string } }>(server, 'GET', `/customers/${id}`, { token: p.live }),
                  (r) => r.body.data.status === 'active',
                );
                live.push(id);
              }
            } else if (pick && step.kind === 'quota') {
              const current = await partnerApi<{ data: { revision: number } }>(server, 'GET', `/customers/${pick}/quota`, {
                token: p.live,
              });
              const changed = await partnerApi(server, 'PUT', `/customers/${pick}/quota`, {
                token: p.live,
                body: { revision: current.body.data.revision, quota: amount(step.vcpu, step.memory, step.storage) },
              });
              assert.ok([200, 409].includes(changed.status), changed.text);
              note('quota', changed.status);
            } else if (pick && step.kind === 'plan') {
              const changed = await partnerApi(server, 'PUT', `/customers/${pick}/plan`, { token: p.live, body: { plan_id: step.plan } });
              assert.ok([200, 409].includes(changed.status), changed.text);
              note('plan', changed.status);
            } else if (pick && step.kind === 'delete') {
              // A scheduled deletion keeps the customer (and its quota) through the grace period; it takes no more changes.
              const mode = step.immediate ? 'immediate' : 'scheduled';
              const deleted = await partnerApi(server, 'DELETE', `/customers/${pick}?mode=${mode}`, { token: p.live });
              assert.equal(deleted.status, 202, deleted.text);
              if (step.immediate) await waitGone(server, p.live, `/customers/${pick}`);
              else scheduled++;
              live.splice(live.indexOf(pick), 1);
            }
            assertBalanced(await books(server, p.live));
          }
          const end = await books(server, p.live);
          assert.equal(end.customers, live.length + scheduled);
          assertBalanced(end);
        }),
        {
          numRuns: 25,
          // Besides the random runs, one that surely meets every outcome the check below asks for.
          examples: [
            [
              [
                { kind: 'create', plan: 'standard' },
                { kind: 'quota', pick: 0, vcpu: 24, memory: 8, storage: 50 },
                { kind: 'quota', pick: 0, vcpu: 4, memory: 16, storage: 60 },
                { kind: 'plan', pick: 0, plan: 'performance' },
                { kind: 'delete', pick: 0, immediate: true },
              ],
            ],
          ],
        },
      );
      // The runs met both outcomes: changes that fit and changes the pool refused.
      for (const seenOutcome of ['create 202', 'quota 200', 'quota 409', 'plan 200']) {
        assert.ok((seen.get(seenOutcome) ?? 0) > 0, `no "${seenOutcome}" in ${JSON.stringify([...seen])}`);
      }
    });
  });
}

/** Two `tenantry serve` processes on one PostgreSQL database change the same partner's capacity at once. */
describe('capacity changes from two processes', { skip: SERVER_DATABASE_URL ? false : 'TENANTRY_TEST_DATABASE_URL is not set' }, () => {
  const operatorToken = randomBytes(24).toString('hex');
  let url = '';
  let first: ServeProcess | undefined;
  let second: ServeProcess | undefined;
  let a: Urls;
  let b: Urls;
  before(async () => {
    url = await createServerDatabase();
    const env = { TENANTRY_DATABASE_URL: url, TENANTRY_OPERATOR_TOKEN: operatorToken, TENANTRY_SANDBOX_DELAY_MS: '0' };
    first = await spawnServe({ ...env, TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-cap-')) }, { keepOutput: false });
    second = await spawnServe({ ...env, TENANTRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'tenantry-cap-')) }, { keepOutput: false });
    a = { partnerUrl: first.partnerUrl, operatorUrl: first.operatorUrl, operatorToken };
    b = { partnerUrl: second.partnerUrl, operatorUrl: second.operatorUrl, operatorToken };
  });
  after(async () => {
    await first?.stop('SIGKILL');
    await second?.stop('SIGKILL');
    if (url) await dropServerDatabase(url);
  });

  test('two concurrent changes end with one success and one BUSY or CONFLICT; the pool is never over-allocated', async () => {
    await createPartner(a, 'race', { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 } });
    const key = await issueKey(a, 'race');
    const token = (
      await eventually(
        () => exchange(a, key),
        (r) => r.status === 200,
      )
    ).body.access_token;
    for (const id of ['r1', 'r2']) {
      const created = await partnerApi(a, 'POST', '/customers', { token, body: customerBody(id, { plan_id: 'standard' }) });
      assert.equal(created.status, 202, created.text);
      await eventually(
        () => partnerApi<{ data: { status: string } }>(a, 'GET', `/customers/${id}`, { token }),
        (r) => r.body.data.status === 'active',
      );
    }
    const outcomes: Record<string, number> = {};
    for (let round = 0; round < 20; round++) {
      // The pool has room for exactly one of the two raises: 4 vCPU allocated, 2 spare.
      const view = await books(a, token);
      assertBalanced(view);
      const set = await operatorApi(a, 'PUT', '/partners/race/capacity', { body: { pool: { vcpu: view.pool.vcpu.allocated + 2 } } });
      assert.equal(set.status, 200, set.text);
      // Even rounds: both processes change the same customer from the same revision.
      // Odd rounds: each raises a different customer by 2 vCPU.
      const targets = round % 2 === 0 ? ['r1', 'r1'] : ['r1', 'r2'];
      const quotas = await Promise.all(
        targets.map((id) => partnerApi<{ data: { revision: number; quota: Amount } }>(a, 'GET', `/customers/${id}/quota`, { token })),
      );
      const results = await Promise.all(
        [a, b].map((server, i) => {
          const current = quotas[i]?.body.data;
          assert.ok(current);
          return partnerApi<{ error?: { code: string } }>(server, 'PUT', `/customers/${targets[i]}/quota`, {
            token,
            body: { revision: current.revision, quota: { ...current.quota, vcpu: current.quota.vcpu + 2 } },
          });
        }),
      );
      const statuses = results.map((r) => r.status).sort();
      assert.deepEqual(statuses, [200, 409], results.map((r) => r.text).join('\n'));
      const refused = results.find((r) => r.status === 409);
      const code = refused?.body.error?.code ?? '';
      assert.ok(['BUSY', 'CONFLICT', 'PARTNER_CAPACITY_EXCEEDED'].includes(code), refused?.text ?? 'no refusal');
      if (code === 'BUSY') assert.equal(refused?.headers.get('retry-after'), '1');
      outcomes[code] = (outcomes[code] ?? 0) + 1;
      assertBalanced(await books(b, token));
      // Give the vCPUs back so the next round starts from the same place.
      for (const id of ['r1', 'r2']) {
        const back = await partnerApi(a, 'PUT', `/customers/${id}/plan`, { token, body: { plan_id: 'standard' } });
        assert.equal(back.status, 200, back.text);
      }
    }
    // Same-customer rounds can only lose on the revision (or the lock); different customers on the pool (or the lock).
    assert.ok((outcomes.CONFLICT ?? 0) + (outcomes.BUSY ?? 0) > 0, JSON.stringify(outcomes));
    assertBalanced(await books(b, token));
  });
});
