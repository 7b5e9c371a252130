import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import { EVENT_TYPES } from './payloads.ts';

interface EventBody {
  id: string;
  event: string;
  partner_id: string;
}

for (const target of testDatabases()) {
  describe(`GET /events [${target.name}]`, () => {
    let server: TestServer;
    let lab: Tokens;
    let plain: Tokens;
    const api = <T = Record<string, unknown>>(token: string, method: string, path: string, body?: unknown) =>
      partnerApi<T>(server, method, path, { token, ...(body !== undefined ? { body } : {}) });

    before(async () => {
      server = await startTestServer(target);
      lab = await partnerWithModes(server, 'lab');
      plain = await partnerWithModes(server, 'plain');
      // Live: a customer.ready each, then suspensions and resumptions; test and the other partner: one each.
      for (const id of ['a', 'b', 'c']) await activeCustomer(server, lab.live, id);
      for (let round = 0; round < 2; round++) {
        for (const id of ['a', 'b', 'c']) {
          assert.equal((await api(lab.live, 'POST', `/customers/${id}/suspend`, {})).status, 200);
          assert.equal((await api(lab.live, 'POST', `/customers/${id}/resume`, {})).status, 200);
        }
      }
      await activeCustomer(server, lab.test, 'in-test');
      await activeCustomer(server, plain.live, 'other');
    });
    after(() => server.stop());

    test('newest first, filtered by type, paginated, 30 days, and its mode only', async () => {
      const all = (await api<{ data: EventBody[] }>(lab.live, 'GET', '/events?limit=200')).body.data;
      assert.ok(all.length > 10);
      assert.deepEqual(
        all.map((e) => e.id),
        [...all.map((e) => e.id)].sort().reverse(),
      );
      const walked: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { status: number; body: { data: EventBody[]; pagination: { next_cursor: string | null } } } = await api(
          lab.live,
          'GET',
          `/events?limit=3&type=customer.suspended${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        assert.equal(page.status, 200);
        walked.push(...page.body.data.map((e) => e.id));
        assert.ok(page.body.data.every((e) => e.event === 'customer.suspended'));
        cursor = page.body.pagination.next_cursor;
      } while (cursor);
      assert.deepEqual(
        walked,
        all.filter((e) => e.event === 'customer.suspended').map((e) => e.id),
      );
      const unknown = assertError(await api(lab.live, 'GET', '/events?type=ping'), 400, 'VALIDATION_ERROR');
      assert.deepEqual(unknown.details?.known_events, [...EVENT_TYPES]);
      assertError(await api(lab.live, 'GET', '/events?kind=x'), 400, 'VALIDATION_ERROR');
      const other = (await api<{ data: EventBody[] }>(plain.live, 'GET', '/events?limit=200')).body.data;
      assert.ok(other.every((e) => e.partner_id === 'plain'));

      // 30 days on: the test mode's clock moves, and its old events leave the list.
      const testEvents = (await api<{ data: EventBody[] }>(lab.test, 'GET', '/events')).body.data;
      assert.ok(testEvents.length > 0);
      await api(lab.test, 'POST', '/test-helpers/clock/advance', { seconds: 31 * 24 * 3600 });
      assert.deepEqual((await api<{ data: EventBody[] }>(lab.test, 'GET', '/events')).body.data, []);
    });
  });
}
