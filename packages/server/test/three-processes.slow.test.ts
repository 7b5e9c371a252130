import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fallbackOf } from '../src/config/settings.ts';
import { assertError, type HttpResult, http, OPERATOR_API, partnerApi } from './client.ts';
import { createServerDatabase, dropServerDatabase, SERVER_DATABASE_URL } from './harness.ts';
import { customerBody, eventually } from './provisioning.ts';
import { groupPartner, type Member, ServiceGroup } from './service-group.ts';

/**
 * Three `tenantry serve` processes on one PostgreSQL database behave as one service: one rate-limit
 * bucket per partner, one effect per Idempotency-Key, a suspension seen by all within the partner
 * cache's bound, and a pool that concurrent quota changes never over-allocate.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Amount {
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  gpus: Record<string, number>;
}

describe('three processes on one PostgreSQL', { skip: SERVER_DATABASE_URL ? false : 'TENANTRY_TEST_DATABASE_URL is not set' }, () => {
  let url = '';
  let group: ServiceGroup;
  before(async () => {
    url = await createServerDatabase();
    group = await ServiceGroup.start(url, 3);
  });
  after(async () => {
    await group?.stop();
    if (url) await dropServerDatabase(url);
  });

  const whoami = (member: Member, token: string) => partnerApi(member, 'GET', '/auth/whoami', { token });

  test('a concurrent burst spread over the three admits exactly the burst', async () => {
    for (let round = 0; round < 3; round++) {
      // A partner of its own each round, one token every 10 s: nothing refills while the burst is answered.
      const { token } = await groupPartner(group.member(round), `burst${round}`, { rate_limit_per_minute: 6, rate_limit_burst: 30 });
      const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => whoami(group.member(i % 3), token)));
      const admitted = answers.filter((answer) => answer.status === 200).length;
      for (const refused of answers.filter((answer) => answer.status !== 200)) assertError(refused, 429, 'RATE_LIMITED');
      assert.equal(admitted, 30, `round ${round}: ${admitted} of 60 admitted, by process ${admittedBy(answers)}`);
    }
  });

  test('over a minute of steady load on all three, admissions never exceed burst + rate', async (t) => {
    const { token } = await groupPartner(group.member(0), 'steady', { rate_limit_per_minute: 120, rate_limit_burst: 20 });
    const startedAt = Date.now();
    let admitted = 0;
    let refused = 0;
    const perSecond: number[] = [];
    const loop = async (member: number) => {
      while (Date.now() - startedAt < 60_000) {
        const answer = await whoami(group.member(member), token);
        if (answer.status === 200) {
          admitted++;
          const second = Math.floor((Date.now() - startedAt) / 1000);
          perSecond[second] = (perSecond[second] ?? 0) + 1;
        } else {
          assertError(answer, 429, 'RATE_LIMITED');
          refused++;
        }
        await sleep(20);
      }
    };
    await Promise.all(Array.from({ length: 12 }, (_, i) => loop(i % 3)));
    const elapsedMinutes = (Date.now() - startedAt) / 60_000;
    t.diagnostic(`${admitted} admitted, ${refused} refused in ${elapsedMinutes.toFixed(3)} min (burst 20, 120 a minute)`);
    // The bucket allows its burst, then its rate; the minute ran a little long while the last answers came.
    assert.ok(admitted <= 20 + Math.ceil(120 * elapsedMinutes), `${admitted} admitted in ${elapsedMinutes.toFixed(3)} min`);
    // And it is not stingier than promised: tokens held by one process are never lost to the others.
    assert.ok(admitted >= 20 + 120 - 4, `${admitted} admitted (${refused} refused); per second: ${perSecond.join(' ')}`);
  });

  test('an Idempotency-Key sent concurrently to all three has one effect and one answer', async () => {
    const { token } = await groupPartner(group.member(0), 'repeat');
    const send = (member: Member) =>
      partnerApi<{ data: { id: string } }>(member, 'POST', '/customers', {
        token,
        body: customerBody('once'),
        headers: { 'idempotency-key': 'create-once' },
      });
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => send(group.member(i % 3))));
    const done = answers.filter((answer) => answer.status === 202);
    for (const answer of answers.filter((a) => a.status !== 202)) assertError(answer, 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
    assert.ok(done.length >= 1, 'the first request answered');
    // Later repeats, to every process, answer exactly what the first did.
    const repeats = await Promise.all([0, 1, 2].map((i) => send(group.member(i))));
    for (const answer of [...done, ...repeats]) {
      assert.equal(answer.status, 202, answer.text);
      assert.equal(answer.text, done[0]?.text);
    }
    const customers = await partnerApi<{ data: { id: string }[] }>(group.member(1), 'GET', '/customers?limit=100', { token });
    assert.deepEqual(
      customers.body.data.map((c) => c.id),
      ['once'],
    );
    const operations = await partnerApi<{ data: unknown[] }>(group.member(2), 'GET', '/customers/once/operations', { token });
    assert.equal(operations.body.data.length, 1, operations.text);
  });

  test('a partner suspended through one process is refused by all three within the partner cache bound', async (t) => {
    const { token } = await groupPartner(group.member(0), 'halted');
    // Every process has the partner cached as active.
    for (let i = 0; i < 3; i++) assert.equal((await whoami(group.member(i), token)).status, 200);
    const suspended = await http(group.member(1).operatorUrl, 'POST', `${OPERATOR_API}/partners/halted/suspend`, {
      token: group.operatorToken,
    });
    assert.equal(suspended.status, 200, suspended.text);
    const at = Date.now();
    const bound = Number(fallbackOf('TENANTRY_PARTNER_CACHE_MS'));
    const refusedAfter = await Promise.all(
      [0, 1, 2].map(async (i) => {
        await eventually(
          () => whoami(group.member(i), token),
          (answer) => answer.status === 403,
          bound + 2_000,
        );
        return Date.now() - at;
      }),
    );
    t.diagnostic(`refused by the three ${refusedAfter.join(', ')} ms after the suspension (bound ${bound} ms)`);
    for (const ms of refusedAfter) assert.ok(ms <= bound + 250, `refused ${refusedAfter.join(', ')} ms after the suspension`);
    for (let i = 0; i < 3; i++) assertError(await whoami(group.member(i), token), 403, 'FORBIDDEN');
  });

  test("concurrent quota raises through all three never over-allocate the partner's pool", async () => {
    const { token } = await groupPartner(group.member(0), 'pool');
    for (const id of ['q0', 'q1', 'q2']) {
      const created = await partnerApi(group.member(0), 'POST', '/customers', { token, body: customerBody(id, { plan_id: 'standard' }) });
      assert.equal(created.status, 202, created.text);
    }
    for (const id of ['q0', 'q1', 'q2']) {
      await eventually(
        () => partnerApi<{ data: { status: string } }>(group.member(1), 'GET', `/customers/${id}`, { token }),
        (r) => r.body.data.status === 'active',
      );
    }
    let raised = 0;
    for (let round = 0; round < 8; round++) {
      // Room for exactly two of the three raises of 2 vCPU.
      const before = await pool(group.member(round % 3), token);
      const set = await http(group.member(0).operatorUrl, 'PUT', `${OPERATOR_API}/partners/pool/capacity`, {
        token: group.operatorToken,
        body: { pool: { vcpu: before.allocated + 4 } },
      });
      assert.equal(set.status, 200, set.text);
      const results = await Promise.all(
        ['q0', 'q1', 'q2'].map(async (id, i) => {
          for (;;) {
            const current = await partnerApi<{ data: { revision: number; quota: Amount } }>(
              group.member(i),
              'GET',
              `/customers/${id}/quota`,
              {
                token,
              },
            );
            const answer = await partnerApi<{ error?: { code: string } }>(group.member(i), 'PUT', `/customers/${id}/quota`, {
              token,
              body: { revision: current.body.data.revision, quota: { ...current.body.data.quota, vcpu: current.body.data.quota.vcpu + 2 } },
            });
            // BUSY: the pool's lock was taken; a caller retries, as the Retry-After says.
            if (answer.status === 409 && answer.body.error?.code === 'BUSY') continue;
            return answer;
          }
        }),
      );
      const succeeded = results.filter((r) => r.status === 200).length;
      for (const refused of results.filter((r) => r.status !== 200)) assertError(refused, 409, 'PARTNER_CAPACITY_EXCEEDED');
      assert.ok(succeeded <= 2, `round ${round}: ${succeeded} raises fit a room of two`);
      raised += succeeded;
      const after = await pool(group.member((round + 1) % 3), token);
      assert.ok(after.allocated <= after.total, `round ${round}: ${after.allocated} allocated of ${after.total}`);
      assert.equal(after.allocated, before.allocated + 2 * succeeded);
    }
    assert.ok(raised >= 8, `${raised} raises in 8 rounds: the room was used`);
  });
});

/** The partner's vCPU pool as it reads it. */
async function pool(member: Member, token: string): Promise<{ total: number; allocated: number }> {
  const capacity = await partnerApi<{ data: { pool: { vcpu: { total: number; allocated: number } } } }>(member, 'GET', '/capacity', {
    token,
  });
  assert.equal(capacity.status, 200, capacity.text);
  return capacity.body.data.pool.vcpu;
}

/** Which process admitted how many, for a failure's message. */
function admittedBy(answers: HttpResult[]): string {
  return [0, 1, 2].map((p) => answers.filter((a, i) => i % 3 === p && a.status === 200).length).join('/');
}
