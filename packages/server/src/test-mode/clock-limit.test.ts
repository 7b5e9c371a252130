import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, fieldErrors, type HttpResult, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { createCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';

/**
 * The test clock's bounds: it runs at most 36,525 days (100 years) ahead of real time, an advance
 * that would pass that is refused with the limit in its details, and `POST
 * /test-helpers/clock/reset` puts it back on real time, whatever state it was left in.
 */
const MAX_OFFSET_SECONDS = 36_525 * 86_400;
const MAX_ADVANCE_SECONDS = 10 * 366 * 86_400;

interface ClockResult {
  data: { now: string; offset_seconds: number };
}

for (const target of testDatabases()) {
  describe(`the test clock's limit and its reset [${target.name}]`, () => {
    let server: TestServer;
    let counter = 0;
    const partner = () => partnerWithModes(server, `clock-${counter++}`);
    const advance = (p: Tokens, seconds: number) =>
      partnerApi<ClockResult>(server, 'POST', '/test-helpers/clock/advance', { token: p.test, body: { seconds } });
    const reset = (p: Tokens) => partnerApi<ClockResult>(server, 'POST', '/test-helpers/clock/reset', { token: p.test });
    const succeeded = (result: HttpResult<ClockResult>) => {
      assert.equal(result.status, 200, result.text);
      return result.body.data;
    };
    /** The partner's test mode answers what it answers on any day: reads 200, a creation 202. */
    const answersAsUsual = async (p: Tokens, customerId: string) => {
      await createCustomer(server, p.test, customerId);
      for (const path of ['/usage', '/events', `/customers/${customerId}/operations`, '/auth/whoami']) {
        const read = await partnerApi(server, 'GET', path, { token: p.test });
        assert.equal(read.status, 200, `${path}: ${read.text}`);
      }
    };

    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    test('an advance past 100 years ahead of real time answers 400 VALIDATION_ERROR on seconds, with the limit; the test mode keeps answering', async () => {
      const p = await partner();
      for (let i = 0; i < 9; i++) succeeded(await advance(p, MAX_ADVANCE_SECONDS));
      const offset = 9 * MAX_ADVANCE_SECONDS;
      const left = MAX_OFFSET_SECONDS - offset;

      const refused = assertError(await advance(p, MAX_ADVANCE_SECONDS), 400, 'VALIDATION_ERROR');
      assert.deepEqual(
        fieldErrors(refused).map((problem) => [problem.in, problem.field]),
        [['body', 'seconds']],
      );
      assert.equal(refused.details?.max_offset_seconds, MAX_OFFSET_SECONDS);
      assert.equal(refused.details?.offset_seconds, offset, 'the refused advance moved nothing');
      assert.equal(refused.details?.max_seconds, left);

      const atLimit = succeeded(await advance(p, left));
      assert.equal(atLimit.offset_seconds, MAX_OFFSET_SECONDS);
      assert.equal(atLimit.now, new Date(server.clock.nowMs() + MAX_OFFSET_SECONDS * 1000).toISOString());
      const beyond = assertError(await advance(p, 1), 400, 'VALIDATION_ERROR');
      assert.equal(beyond.details?.max_seconds, 0);
      await answersAsUsual(p, 'at-the-limit');
    });

    test('reset puts the test clock back on real time; test data keeps the times it was recorded with', async () => {
      const p = await partner();
      succeeded(await advance(p, 86_400));
      const early = await createCustomer(server, p.test, 'from-tomorrow');
      const back = succeeded(await reset(p));
      assert.deepEqual(back, { now: server.clock.now().toISOString(), offset_seconds: 0 });
      const fresh = await createCustomer(server, p.test, 'from-today');
      assert.equal(fresh.customer.created_at, server.clock.now().toISOString(), 'new test data is on real time');
      const kept = await partnerApi<{ data: { created_at: string } }>(server, 'GET', '/customers/from-tomorrow', { token: p.test });
      assert.equal(kept.body.data.created_at, early.customer.created_at);
      assert.equal(succeeded(await advance(p, 60)).offset_seconds, 60, 'the clock moves on from real time');
      assert.equal(succeeded(await reset(p)).offset_seconds, 0);
      assert.equal(succeeded(await reset(p)).offset_seconds, 0, 'a reset on real time changes nothing');
    });

    test('a clock at the limit, or one left past year 9999 before the limit existed, is brought back by reset', async () => {
      const p = await partner();
      for (let i = 0; i < 9; i++) succeeded(await advance(p, MAX_ADVANCE_SECONDS));
      succeeded(await advance(p, MAX_OFFSET_SECONDS - 9 * MAX_ADVANCE_SECONDS));
      assert.equal(succeeded(await reset(p)).offset_seconds, 0);
      assert.equal(succeeded(await advance(p, MAX_ADVANCE_SECONDS)).offset_seconds, MAX_ADVANCE_SECONDS);

      const stranded = await partner();
      const year10043 = Date.UTC(10043, 6, 1) - server.clock.nowMs();
      await server.database.db.updateTable('partners').set({ test_clock_offset_ms: year10043 }).where('id', '=', stranded.id).execute();
      // Past the partner cache's longest life, so the requests below read the row as written.
      server.clock.advance(5_001);
      const refused = assertError(await advance(stranded, 1), 400, 'VALIDATION_ERROR');
      assert.equal(refused.details?.max_seconds, 0);
      assert.deepEqual(succeeded(await reset(stranded)), { now: server.clock.now().toISOString(), offset_seconds: 0 });
      await answersAsUsual(stranded, 'back-on-time');
    });
  });
}
