import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { createCustomer, customerBody, partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import { newCustomerQuota } from '../capacity/quotas.ts';
import type { Resources } from '../capacity/resources.ts';
import type { Tenant } from '../platform/tenant.ts';
import { createdTogether, type PendingCreate } from './create-together.ts';
import type { CreateCustomerRequest } from './schemas.ts';
import { newCustomerRows } from './service.ts';

/**
 * A create's one statement (decisions 241, 259): the customers' rows, their count on the partner's row,
 * the capacity lock, the checks and the allocation, committed on their own, for one create or a batch of
 * a partner's creates. It creates only when every check plainly passes for all of them; otherwise it
 * must write nothing at all (each create then runs on its own, and in a transaction that answers the
 * exact error, which customers.test.ts asserts through the API). Each test here runs the statement
 * itself and looks at what it left.
 */
for (const target of testDatabases()) {
  describe(`a create in one statement [${target.name}]`, () => {
    let server: TestServer;
    let acme: Tokens;
    before(async () => {
      server = await startTestServer(target);
      acme = await partnerWithModes(server, 'acme');
      // Operations stay open: the open-operation check has something to count.
      await server.services.engine.stop();
    });
    after(() => server.stop());

    const db = () => server.database.db;
    const tenant = async (mode: 'live' | 'test' = 'live'): Promise<Tenant> => ({
      partner: await db().selectFrom('partners').selectAll().where('id', '=', 'acme').executeTakeFirstOrThrow(),
      partnerId: 'acme',
      mode,
      scope: mode === 'live' ? 'live' : 'test:acme',
      now: server.clock.now(),
    });

    type Extra = { project?: string; plan_id?: string; defaultPlanId?: string; pool?: Resources; mode?: 'test' };

    /** A new customer's create as `POST /customers` would make it with this body. */
    const pending = async (id: string, extra: Extra = {}): Promise<PendingCreate> => {
      const t = await tenant(extra.mode);
      const request = customerBody(id, extra.project ? { project: extra.project } : {}) as CreateCustomerRequest;
      const wanted = await newCustomerQuota(db(), t, extra.plan_id ?? t.partner.default_plan_id);
      const organization = `${t.partner.customer_prefix}-${id}`;
      const names = { organization, namespace: `${organization}-${extra.project ?? 'default'}`, project: extra.project ?? 'default' };
      return {
        tenant: t,
        request,
        rows: newCustomerRows(t, request, wanted, names, server.clock.now()),
        organization: names.organization,
        namespace: names.namespace,
        defaultPlanId: extra.defaultPlanId ?? (extra.plan_id === undefined ? wanted.planId : null),
        wanted: extra.pool ? { ...wanted, pool: extra.pool } : wanted,
      };
    };

    /** Runs the statement for one new customer. */
    const attempt = async (id: string, extra: Extra = {}) => createdTogether(db(), [await pending(id, extra)]);

    /** Runs the statement for several new customers at once, as a burst of `POST /customers` would. */
    const together = async (...creates: [string, Extra?][]) =>
      createdTogether(db(), await Promise.all(creates.map(([id, extra]) => pending(id, extra))));

    /** What a create writes: the partner's customers and count, its open operations, its allocation. */
    const books = async () => {
      const partner = await db().selectFrom('partners').select('customer_count').where('id', '=', 'acme').executeTakeFirstOrThrow();
      const customers = await db().selectFrom('customers').select('id').where('partner_id', '=', 'acme').orderBy('id').execute();
      const users = await db().selectFrom('users').select('uid').where('partner_id', '=', 'acme').execute();
      const projects = await db().selectFrom('projects').select('namespace').where('partner_id', '=', 'acme').execute();
      const operations = await db().selectFrom('operations').select('id').where('partner_id', '=', 'acme').execute();
      const allocation = await db()
        .selectFrom('capacity_allocations')
        .select('allocated')
        .where('partner_id', '=', 'acme')
        .where('mode', '=', 'live')
        .executeTakeFirst();
      return {
        count: partner.customer_count,
        customers: customers.map((c) => c.id),
        users: users.length,
        projects: projects.length,
        operations: operations.length,
        allocated: allocation?.allocated,
      };
    };

    /** Asserts that a run of the statement is refused and leaves `before`'s books as they were. */
    const refusedAgainst = (before: Awaited<ReturnType<typeof books>>) => async (why: string, run: () => Promise<boolean>) => {
      assert.equal(await run(), false, why);
      assert.deepEqual(await books(), before, `${why}: nothing written`);
    };

    const limits = async (set: { max_customers?: number; max_open_operations?: number }) =>
      db().updateTable('partners').set(set).where('id', '=', 'acme').execute();

    test('the common case creates the customer whole: its rows, its count and its quota out of the pool', async () => {
      await createCustomer(server, acme.live, 'first');
      const before = await books();
      assert.equal(await attempt('second'), true);
      const after = await books();
      const quota = (await db().selectFrom('customers').select('quota').where('id', '=', 'second').executeTakeFirstOrThrow()).quota;
      assert.deepEqual(after, {
        count: before.count + 1,
        customers: [...before.customers, 'second'],
        users: before.users + 1,
        projects: before.projects + 1,
        operations: before.operations + 1,
        allocated: {
          vcpu: (before.allocated?.vcpu ?? 0) + quota.vcpu,
          memory_gib: (before.allocated?.memory_gib ?? 0) + quota.memory_gib,
          storage_gib: (before.allocated?.storage_gib ?? 0) + quota.storage_gib,
          gpus: before.allocated?.gpus ?? {},
        },
      });
    });

    test('each check that does not plainly pass leaves everything as it was, for the transaction to answer', async () => {
      await createCustomer(server, acme.live, 'pair-one');
      const t = await tenant();
      const before = await books();
      const refused = refusedAgainst(before);

      await limits({ max_customers: before.count });
      await refused('at the maximum of customers', () => attempt('over-limit'));
      await limits({ max_customers: 0 });

      await refused('the default plan changed since it was read', () => attempt('old-plan', { defaultPlanId: 'no-longer-the-default' }));

      const full: Resources = { ...(before.allocated as Resources) };
      await refused('the pool cannot take the quota', () => attempt('no-room', { pool: full }));
      // The transaction makes the allocation's row, for the partner's first customer of a mode.
      await refused('no allocation yet', () => attempt('first-test-customer', { mode: 'test' }));

      await limits({ max_open_operations: before.operations });
      await refused('as many operations open as allowed', () => attempt('too-busy'));
      await limits({ max_open_operations: t.partner.max_open_operations });

      // Organizations and namespaces are one name space: `first`'s project is `<prefix>-first-default`,
      // and `pair` with project `one` would be `<prefix>-pair-one`, the organization of `pair-one`.
      await refused("an organization that is a project's namespace", () => attempt('first-default'));
      await refused("a first namespace that is a customer's organization", () => attempt('pair', { project: 'one' }));

      // With each condition gone, the same statement creates.
      assert.equal(await attempt('over-limit'), true);
    });

    test('a taken id is the unique key’s violation, and nothing is written', async () => {
      const before = await books();
      await assert.rejects(attempt('first'), (error: { code?: string }) => error.code === '23505');
      assert.deepEqual(await books(), before);
    });

    test('a batch creates every customer of it whole: their rows, their count and the sum of their quotas out of the pool', async () => {
      const before = await books();
      assert.equal(await together(['batch-a'], ['batch-b', { plan_id: 'performance' }], ['batch-c']), true);
      const after = await books();
      const quotas = await db().selectFrom('customers').select('quota').where('id', 'in', ['batch-a', 'batch-b', 'batch-c']).execute();
      const sum = (key: 'vcpu' | 'memory_gib' | 'storage_gib') =>
        quotas.reduce((total, { quota }) => total + quota[key], before.allocated?.[key] ?? 0);
      assert.notDeepEqual(quotas[0]?.quota, quotas[1]?.quota, 'the batch held two plans');
      assert.deepEqual(after, {
        count: before.count + 3,
        customers: [...before.customers, 'batch-a', 'batch-b', 'batch-c'].sort(),
        users: before.users + 3,
        projects: before.projects + 3,
        operations: before.operations + 3,
        allocated: {
          vcpu: sum('vcpu'),
          memory_gib: sum('memory_gib'),
          storage_gib: sum('storage_gib'),
          gpus: before.allocated?.gpus ?? {},
        },
      });
      // Each row as its create made it: the owner, project and operation of each customer are its own.
      const owners = await db()
        .selectFrom('users')
        .innerJoin('customers', 'customers.uid', 'users.customer_uid')
        .select(['customers.id', 'users.email', 'users.required_actions', 'users.created_at'])
        .where('customers.id', 'in', ['batch-a', 'batch-c'])
        .orderBy('customers.id')
        .execute();
      assert.deepEqual(
        owners.map((o) => [o.id, o.email, o.required_actions, o.created_at instanceof Date]),
        [
          ['batch-a', 'owner@batch-a.example', [], true],
          ['batch-c', 'owner@batch-c.example', [], true],
        ],
      );
    });

    test('a batch is written only when every check passes for all of it; one that does not leaves everything as it was', async () => {
      await createCustomer(server, acme.live, 'group-one');
      const t = await tenant();
      const before = await books();
      const refused = refusedAgainst(before);

      await limits({ max_customers: before.count + 2 });
      await refused('room for two customers, a batch of three', () => together(['cap-a'], ['cap-b'], ['cap-c']));
      await limits({ max_customers: 0 });

      await refused('one create of the batch read a default plan that is no longer the default', () =>
        together(['plan-a'], ['plan-b', { defaultPlanId: 'no-longer-the-default' }]),
      );

      const room = {
        ...(before.allocated as Resources),
        vcpu: (before.allocated?.vcpu ?? 0) + 2 * (await pending('probe')).wanted.quota.vcpu,
      };
      await refused('the pool has room for two quotas, a batch of three', () =>
        together(['room-a', { pool: room }], ['room-b', { pool: room }], ['room-c', { pool: room }]),
      );
      await refused('the creates of the batch read different pools', () => together(['pool-a'], ['pool-b', { pool: room }]));

      await limits({ max_open_operations: before.operations + 2 });
      await refused('room for two more open operations, a batch of three', () => together(['busy-a'], ['busy-b'], ['busy-c']));
      await limits({ max_open_operations: t.partner.max_open_operations });

      // Names clash inside the batch too: `pair`'s first namespace is `<prefix>-pair-default`, the
      // organization of `pair-default`.
      await refused('one create of the batch takes the platform name of another', () => together(['pair'], ['pair-default']));
      await refused("one create of the batch takes an existing project's namespace", () => together(['fine'], ['group-one-default']));

      // Within the limits, the same batch creates.
      await limits({ max_customers: before.count + 3 });
      assert.equal(await together(['cap-a'], ['cap-b'], ['cap-c']), true);
      await limits({ max_customers: 0 });
    });

    test('an id taken inside a batch is the unique key’s violation, and nothing of the batch is written', async () => {
      const before = await books();
      await assert.rejects(together(['twice-a'], ['twice'], ['twice']), (error: { code?: string }) => error.code === '23505');
      assert.deepEqual(await books(), before);
    });
  });
}
