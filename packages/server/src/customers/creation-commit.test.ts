import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { createCustomer, eventsOf, partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import { wholeDatabase } from '../app/database.ts';
import { OperationEngine } from '../operations/engine.ts';
import type { FinalOutcome, OperationHandler } from '../operations/handler.ts';
import { expediteCustomerOperations } from '../operations/store.ts';
import { registerCustomerSteps } from './steps.ts';

/**
 * A creation's commit: the customer, its first project, a ready one's owner, the operation's outcome and
 * its event, in the one short transaction that finishes every operation, written whole or not at all.
 * These tests run the real `customer.create` handler in an engine of their own (the server's is stopped),
 * whose look can be held while a partner's change lands under it.
 */
for (const target of testDatabases()) {
  describe(`a creation's commit [${target.name}]`, () => {
    let server: TestServer;
    let acme: Tokens;
    before(async () => {
      server = await startTestServer(target);
      acme = await partnerWithModes(server, 'acme');
      await server.services.engine.stop();
    });
    after(() => server.stop());

    /** The real `customer.create` handler, registered as the composition root registers it. */
    const realHandler = (): OperationHandler => {
      let handler: OperationHandler | undefined;
      const registry = {
        register: (type: string, registered: OperationHandler) => {
          if (type === 'customer.create') handler = registered;
        },
        addSweep: () => {},
      };
      const { platform, users, partnerCache, options } = server.services;
      registerCustomerSteps(registry as unknown as OperationEngine, {
        db: server.database.db,
        clock: server.clock,
        logger: options.logger,
        platform,
        users,
        partnerCache,
      });
      assert.ok(handler, 'customer.create is registered');
      return handler;
    };

    /** An engine running the real handler, whose look may be held (`hold`), its outcome replaced by `outcome` when given. */
    const engineWith = (options: { outcome?: FinalOutcome; hold?: Promise<void>; looked?: () => void } = {}) => {
      const real = realHandler();
      const engine = new OperationEngine({
        db: server.database.db,
        clock: server.clock,
        logger: server.services.options.logger,
        concurrency: 1,
        recordEvent: (trx, event) => server.services.events.record(wholeDatabase(trx), event),
      });
      engine.register('customer.create', {
        ...real,
        advance: async (op, ctx) => {
          const reached = await real.advance(op, ctx);
          options.looked?.();
          await options.hold;
          return options.outcome ?? reached;
        },
      });
      return engine;
    };

    /** A look held once it has reached its outcome (`reached`), until `release()`. */
    const heldLook = () => {
      let looked!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((resolve) => {
        looked = resolve;
      });
      const hold = new Promise<void>((resolve) => {
        release = resolve;
      });
      return { looked, reached, hold, release };
    };

    const rows = async (id: string) =>
      server.database.db
        .selectFrom('customers')
        .innerJoin('projects', 'projects.customer_uid', 'customers.uid')
        .innerJoin('users', (join) => join.onRef('users.customer_uid', '=', 'customers.uid').on('users.is_owner', '=', true))
        .innerJoin('operations', (join) =>
          join.onRef('operations.customer_uid', '=', 'customers.uid').on('operations.type', '=', 'customer.create'),
        )
        .select(['customers.status', 'projects.state', 'users.platform_state', 'operations.status as operation', 'operations.lease_owner'])
        .where('customers.id', '=', id)
        .where('customers.partner_id', '=', 'acme')
        .executeTakeFirstOrThrow();
    const eventsFor = async (id: string) => (await eventsOf(server, 'acme')).filter((e) => e.data.customer_id === id);

    test('a success settles the customer, its first project and owner, the operation and its event at once', async () => {
      const { operation } = await createCustomer(server, acme.live, 'settled', { project: 'web' });
      assert.equal(await engineWith().runDue(), 1);
      assert.deepEqual(await rows('settled'), {
        status: 'active',
        state: 'ready',
        platform_state: 'ready',
        operation: 'succeeded',
        lease_owner: null,
      });
      const read = await partnerApi<{ data: { projects: Record<string, unknown>[] } }>(server, 'GET', '/customers/settled', {
        token: acme.live,
      });
      const events = await eventsFor('settled');
      assert.deepEqual(
        events.map((e) => e.type),
        ['customer.ready'],
      );
      // The event's project is the one the API shows, to the millisecond.
      assert.deepEqual(events[0]?.data, {
        customer_id: 'settled',
        operation_id: operation.id,
        project: read.body.data.projects[0],
        state: 'active',
        error: null,
      });
    });

    test("a failure settles them failed at once, with the failure's code in the event", async () => {
      const { operation } = await createCustomer(server, acme.live, 'settled-failed');
      const engine = engineWith({ outcome: { state: 'failed', code: 'PROVISIONING_FAILED', message: 'the platform refused' } });
      assert.equal(await engine.runDue(), 1);
      const settled = await rows('settled-failed');
      assert.deepEqual(
        { status: settled.status, state: settled.state, operation: settled.operation },
        { status: 'failed', state: 'failed', operation: 'failed' },
      );
      const [event] = await eventsFor('settled-failed');
      assert.equal(event?.type, 'customer.failed');
      assert.deepEqual(event?.data.error, { code: 'PROVISIONING_FAILED', message: 'the platform refused' });
      assert.equal(event?.data.operation_id, operation.id);
      assert.equal((event?.data.project as { state?: string } | null)?.state, 'failed');
    });

    test('a look whose lease was taken back writes nothing; the next look finishes the creation', async () => {
      await createCustomer(server, acme.live, 'lease-lost');
      const held = heldLook();
      const pass = engineWith(held).runDue();
      await held.reached;
      // A deletion's way of taking the lease back while the look runs.
      const { uid } = await server.database.db
        .selectFrom('customers')
        .select('uid')
        .where('id', '=', 'lease-lost')
        .executeTakeFirstOrThrow();
      await expediteCustomerOperations(server.database.db, uid, server.clock.now());
      const before = await rows('lease-lost');
      held.release();
      assert.equal(await pass, 1);
      assert.deepEqual(await rows('lease-lost'), before, 'the customer, its project and owner settle with the outcome or not at all');
      assert.equal(before.status, 'provisioning');
      assert.deepEqual(await eventsFor('lease-lost'), [], 'nor its event');
      assert.equal(await engineWith().runDue(), 1);
      assert.equal((await rows('lease-lost')).status, 'active');
      assert.deepEqual(
        (await eventsFor('lease-lost')).map((e) => e.type),
        ['customer.ready'],
      );
    });

    test('a customer deleted while its creation ran: that look writes nothing, the next fails the creation', async () => {
      const { operation } = await createCustomer(server, acme.live, 'deleted-meanwhile');
      const held = heldLook();
      const pass = engineWith(held).runDue();
      await held.reached;
      const deleted = await partnerApi(server, 'DELETE', '/customers/deleted-meanwhile?mode=immediate', { token: acme.live });
      assert.equal(deleted.status, 202, deleted.text);
      const before = { rows: await rows('deleted-meanwhile'), events: await eventsFor('deleted-meanwhile') };
      held.release();
      assert.equal(await pass, 1);
      assert.deepEqual(
        { rows: await rows('deleted-meanwhile'), events: await eventsFor('deleted-meanwhile') },
        before,
        'the deletion took the lease back: the look that ran under it writes nothing',
      );
      await engineWith().runDue();
      const creation = await server.database.db
        .selectFrom('operations')
        .select(['status', 'error_code'])
        .where('id', '=', String(operation.id))
        .executeTakeFirstOrThrow();
      assert.deepEqual(creation, { status: 'failed', error_code: 'CUSTOMER_DELETING' });
      const failed = (await eventsFor('deleted-meanwhile')).find((e) => e.type === 'customer.failed');
      assert.equal((failed?.data.error as { code?: string } | undefined)?.code, 'CUSTOMER_DELETING');
    });
  });
}
