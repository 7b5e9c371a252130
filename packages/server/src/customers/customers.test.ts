import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, fieldErrors, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import {
  activeCustomer,
  createCustomer,
  customerBody,
  eventsOf,
  partnerWithModes,
  refreshTokens,
  type Tokens,
  waitForOperation,
} from '../../test/provisioning.ts';

const DAY_S = 24 * 3600;

for (const target of testDatabases()) {
  describe(`customers [${target.name}]`, () => {
    let server: TestServer;
    let acme: Tokens;
    before(async () => {
      server = await startTestServer(target);
      acme = await partnerWithModes(server, 'acme');
    });
    after(() => server.stop());

    test('create answers 202 with the customer and its pending operation; the operation makes it active with its first project', async () => {
      const created = await partnerApi<{ data: { customer: Record<string, unknown>; operation: Record<string, unknown> } }>(
        server,
        'POST',
        '/customers',
        {
          token: acme.live,
          body: customerBody('globex', { external_id: 'crm-42', display_name: 'Globex', project: 'web' }),
        },
      );
      assert.equal(created.status, 202, created.text);
      const { customer, operation } = created.body.data;
      assert.equal(customer.id, 'globex');
      assert.equal(customer.status, 'provisioning');
      assert.equal(customer.plan_id, 'standard', "the partner's default plan");
      assert.deepEqual(customer.owner, { username: 'owner', email: 'owner@globex.example' });
      assert.equal(customer.projects, undefined);
      assert.equal(operation.type, 'customer.create');
      assert.equal(operation.status, 'pending');
      assert.match(String(operation.id), /^op_[0-9a-z]{26}$/);

      const done = await waitForOperation(server, acme.live, 'globex', String(operation.id));
      assert.equal(done.status, 'succeeded');
      assert.equal(done.error, null);
      const read = await partnerApi<{ data: Record<string, unknown> & { projects: Record<string, unknown>[] } }>(
        server,
        'GET',
        '/customers/globex',
        { token: acme.live },
      );
      assert.equal(read.body.data.status, 'active');
      assert.equal(read.body.data.external_id, 'crm-42');
      assert.equal(read.body.data.projects.length, 1);
      assert.equal(read.body.data.projects[0]?.name, 'web');
      assert.equal(read.body.data.projects[0]?.state, 'ready');
      assert.equal(read.body.data.projects[0]?.namespace, 'acme-globex-web', 'the namespace is <partner prefix>-<customer id>-<project>');
      assert.match(String(read.body.data.projects[0]?.cidr), /^10\.\d+\.\d+\.0\/24$/);

      const events = (await eventsOf(server, 'acme')).filter((e) => e.data.customer_id === 'globex');
      assert.deepEqual(
        events.map((e) => e.type),
        ['customer.ready'],
      );
      const data = events[0]?.data ?? {};
      assert.equal(data.operation_id, operation.id);
      assert.equal(data.state, 'active');
      assert.equal(data.error, null);
      assert.deepEqual(data.project, read.body.data.projects[0], 'the event carries the first project as it settled, ready');
      assert.match(String(events[0]?.id), /^dlv_/);

      const whoami = await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token: acme.live });
      assert.equal(whoami.body.data.customer_count, 1);

      // Settled with the customer, in its commit: the owner made on the platform, the plan's quota applied
      // (nothing left for the sweeps that take back half-made users and apply quotas again).
      const books = await server.database.db
        .selectFrom('customers')
        .innerJoin('users', (join) => join.onRef('users.customer_uid', '=', 'customers.uid').on('users.is_owner', '=', true))
        .innerJoin('customer_quotas', 'customer_quotas.customer_uid', 'customers.uid')
        .select(['customer_quotas.quota_revision', 'customer_quotas.quota_applied_revision', 'users.platform_state'])
        .where('customers.id', '=', 'globex')
        .where('customers.partner_id', '=', 'acme')
        .executeTakeFirstOrThrow();
      assert.deepEqual(books, { quota_revision: 1, quota_applied_revision: 1, platform_state: 'ready' });
      const applied = await server.services.sandbox.appliedQuota(
        { partnerId: 'acme', mode: 'live', now: server.clock.now() },
        { customerId: 'globex', organization: 'acme-globex' },
      );
      const standard = { vcpu: 2, memory_gib: 8, storage_gib: 50, gpus: {} };
      assert.deepEqual(
        { planId: applied.planId, quota: applied.quota },
        { planId: 'standard', quota: standard },
        "the plan's quota is on the platform",
      );
    });

    test('bad input answers 400 VALIDATION_ERROR naming each field, and writes nothing', async () => {
      const cases: [unknown, string][] = [
        [{ id: 'Bad_Id', owner: { username: 'a', email: 'a@b.example' } }, 'id'],
        [{ id: 'ok-id' }, 'owner'],
        [{ id: 'ok-id', owner: { username: 'a', email: 'not-an-email' } }, 'owner.email'],
        [{ id: 'ok-id', owner: { username: 'a', email: 'a@b.example' }, colour: 'red' }, 'colour'],
        [{ id: 'ok-id', owner: { username: 'a', email: 'a@b.example' }, project: 'x'.repeat(41) }, 'project'],
      ];
      for (const [body, field] of cases) {
        const error = assertError(await partnerApi(server, 'POST', '/customers', { token: acme.live, body }), 400, 'VALIDATION_ERROR');
        assert.ok(
          fieldErrors(error).some((p) => p.field === field),
          `${field} is named: ${JSON.stringify(error.details)}`,
        );
      }
      const longNamespace = customerBody('a'.repeat(40), { project: 'b'.repeat(30) });
      const error = assertError(
        await partnerApi(server, 'POST', '/customers', { token: acme.live, body: longNamespace }),
        400,
        'VALIDATION_ERROR',
      );
      assert.match(fieldErrors(error)[0]?.message ?? '', /namespace/);
      assertError(await partnerApi(server, 'GET', '/customers/ok-id', { token: acme.live }), 404, 'NOT_FOUND');
    });

    test('ALREADY_EXISTS for an id the partner already has; another partner may use the same id, and learns nothing of the first', async () => {
      await activeCustomer(server, acme.live, 'initech');
      const again = assertError(
        await partnerApi(server, 'POST', '/customers', { token: acme.live, body: customerBody('initech') }),
        409,
        'ALREADY_EXISTS',
      );
      assert.equal(again.details?.field, 'id');
      // Each partner's customers are `<prefix>-<id>` on the platform: ids are unique per partner and mode only.
      const other = await partnerWithModes(server, 'umbrella');
      await activeCustomer(server, other.live, 'initech', { owner: { username: 'owner', email: 'owner@initech.example' } });
      const theirs = await partnerApi<{ data: { projects: { namespace: string }[] } }>(server, 'GET', '/customers/initech', {
        token: other.live,
      });
      assert.equal(theirs.body.data.projects[0]?.namespace, 'umbrella-initech-default');
      const ours = await partnerApi<{ data: { projects: { namespace: string }[] } }>(server, 'GET', '/customers/initech', {
        token: acme.live,
      });
      assert.equal(ours.body.data.projects[0]?.namespace, 'acme-initech-default');
      // Test mode is the partner's own sandbox: the same id is free there too.
      await createCustomer(server, other.test, 'initech');
      assertError(await partnerApi(server, 'GET', '/customers/hooli', { token: acme.live }), 404, 'NOT_FOUND');
    });

    test('another partner and the other mode see 404 NOT_FOUND; lists never mix them', async () => {
      const stranger = await partnerWithModes(server, 'stranger');
      assertError(await partnerApi(server, 'GET', '/customers/globex', { token: stranger.live }), 404, 'NOT_FOUND');
      assertError(await partnerApi(server, 'GET', '/customers/globex', { token: acme.test }), 404, 'NOT_FOUND');
      assertError(await partnerApi(server, 'POST', '/customers/globex/suspend', { token: stranger.live }), 404, 'NOT_FOUND');
      const list = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/customers', { token: stranger.live });
      assert.deepEqual(list.body.data, []);
    });

    test('list: by id, filters before paging, items without projects, cursors bound to their filters', async () => {
      const p = await partnerWithModes(server, 'lister');
      for (const id of ['l-c', 'l-a', 'l-b', 'l-d'])
        await activeCustomer(server, p.live, id, { external_id: id === 'l-b' ? 'crm-b' : 'crm-x' });
      await partnerApi(server, 'POST', '/customers/l-d/suspend', { token: p.live });
      const page1 = await partnerApi<{ data: Record<string, unknown>[]; pagination: { next_cursor: string | null; limit: number } }>(
        server,
        'GET',
        '/customers?limit=3',
        { token: p.live },
      );
      assert.deepEqual(
        page1.body.data.map((c) => c.id),
        ['l-a', 'l-b', 'l-c'],
      );
      assert.ok(page1.body.data.every((c) => !('projects' in c)));
      assert.equal(page1.body.pagination.limit, 3);
      const cursor = page1.body.pagination.next_cursor;
      assert.ok(cursor);
      const page2 = await partnerApi<{ data: { id: string }[]; pagination: { next_cursor: null } }>(
        server,
        'GET',
        `/customers?limit=3&cursor=${encodeURIComponent(cursor)}`,
        { token: p.live },
      );
      assert.deepEqual(
        page2.body.data.map((c) => c.id),
        ['l-d'],
      );
      // CONTRACT §4: a list item is the customer `GET /customers/{id}` answers, without its projects
      // (the list reads fewer columns and its serialiser writes nullable fields by type).
      const readWithoutProjects = async (id: string) => {
        const { projects: _, ...customer } = (
          await partnerApi<{ data: Record<string, unknown> }>(server, 'GET', `/customers/${id}`, { token: p.live })
        ).body.data;
        return customer;
      };
      const readSuspended = await readWithoutProjects('l-d');
      assert.equal(typeof readSuspended.suspended_at, 'string', 'its nullable fields hold values');
      assert.deepEqual(page2.body.data[0], readSuspended);
      assert.deepEqual(
        page1.body.data.find((c) => c.id === 'l-b'),
        await readWithoutProjects('l-b'),
      );
      assert.equal(page2.body.pagination.next_cursor, null);
      const filtered = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/customers?external_id=crm-b', { token: p.live });
      assert.deepEqual(
        filtered.body.data.map((c) => c.id),
        ['l-b'],
      );
      const suspended = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/customers?status=suspended', { token: p.live });
      assert.deepEqual(
        suspended.body.data.map((c) => c.id),
        ['l-d'],
      );
      assertError(
        await partnerApi(server, 'GET', `/customers?limit=3&status=active&cursor=${encodeURIComponent(cursor)}`, { token: p.live }),
        400,
        'VALIDATION_ERROR',
      );
      assertError(await partnerApi(server, 'GET', '/customers?status=sleeping', { token: p.live }), 400, 'VALIDATION_ERROR');
    });

    test('an Idempotency-Key replays the 202 of a create: one customer, one operation', async () => {
      const send = () =>
        partnerApi<{ data: { operation: { id: string } } }>(server, 'POST', '/customers', {
          token: acme.live,
          body: customerBody('replayed'),
          headers: { 'idempotency-key': 'create-replayed-1' },
        });
      const first = await send();
      const second = await send();
      assert.equal(first.status, 202);
      assert.equal(second.status, 202);
      assert.equal(second.headers.get('idempotent-replayed'), 'true');
      assert.equal(second.body.data.operation.id, first.body.data.operation.id);
      const ops = await partnerApi<{ data: unknown[] }>(server, 'GET', '/customers/replayed/operations', { token: acme.live });
      assert.equal(ops.body.data.length, 1);
    });

    test('operation records are kept 7 days', async () => {
      await activeCustomer(server, acme.live, 'ephemeral', { owner: { username: 'o', email: 'o@ephemeral.example' } });
      const ops = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/customers/ephemeral/operations', { token: acme.live });
      assert.equal(ops.body.data.length, 1);
      const id = ops.body.data[0]?.id ?? '';
      server.clock.advance(7 * DAY_S * 1000 + 1000);
      await refreshTokens(server, acme);
      const later = await partnerApi<{ data: unknown[] }>(server, 'GET', '/customers/ephemeral/operations', { token: acme.live });
      assert.deepEqual(later.body.data, []);
      assertError(await partnerApi(server, 'GET', `/customers/ephemeral/operations/${id}`, { token: acme.live }), 404, 'NOT_FOUND');
    });

    test('LIMIT_REACHED at the maximum customers, with max and current', async () => {
      const small = await partnerWithModes(server, 'small', {
        limits: { max_customers: 1, rate_limit_per_minute: 10_000, rate_limit_burst: 1000 },
      });
      await activeCustomer(server, small.live, 'only-one');
      const error = assertError(
        await partnerApi(server, 'POST', '/customers', { token: small.live, body: customerBody('one-more') }),
        403,
        'LIMIT_REACHED',
      );
      assert.equal(error.details?.max, 1);
      assert.equal(error.details?.current, 1);
      // Test mode counts its own customers.
      await createCustomer(server, small.test, 'one-more');
    });

    // A partner's creates are counted under its row's lock, so the limit holds exactly.
    test('concurrent creates: exactly max_customers succeed, the rest answer LIMIT_REACHED, the count is exact', async () => {
      const burst = await partnerWithModes(server, 'burst', {
        limits: { max_customers: 4, rate_limit_per_minute: 10_000, rate_limit_burst: 1000 },
      });
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) => partnerApi(server, 'POST', '/customers', { token: burst.live, body: customerBody(`b${i}`) })),
      );
      const statuses = answers.map((a) => a.status).sort();
      assert.deepEqual(statuses, [...Array(4).fill(202), ...Array(8).fill(403)], answers.map((a) => a.text).join('\n'));
      for (const refused of answers.filter((a) => a.status === 403)) assertError(refused, 403, 'LIMIT_REACHED');
      const listed = await partnerApi<{ data: unknown[] }>(server, 'GET', '/customers?limit=100', { token: burst.live });
      assert.equal(listed.body.data.length, 4, 'refused creates left no customer behind');
      const whoami = await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token: burst.live });
      assert.equal(whoami.body.data.customer_count, 4);
    });

    test('concurrent creates whose organization and first namespace clash: one is made, the other answers ALREADY_EXISTS', async () => {
      const clash = await partnerWithModes(server, 'clash', { limits: { rate_limit_per_minute: 10_000, rate_limit_burst: 1000 } });
      // Customer `c0` with project `d` is namespace `<prefix>-c0-d`, the organization of customer `c0-d`.
      for (let round = 0; round < 5; round++) {
        const [first, second] = await Promise.all([
          partnerApi(server, 'POST', '/customers', { token: clash.live, body: { ...customerBody(`c${round}`), project: 'd' } }),
          partnerApi(server, 'POST', '/customers', { token: clash.live, body: customerBody(`c${round}-d`) }),
        ]);
        const statuses = [first.status, second.status].sort();
        assert.deepEqual(statuses, [202, 409], `${first.text}\n${second.text}`);
        assertError(first.status === 409 ? first : second, 409, 'ALREADY_EXISTS');
      }
    });
  });
}
