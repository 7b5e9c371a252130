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
 * A creation's commit, which must write everything or nothing. These tests run the real
 * `customer.create` handler in an engine of their own (the server's is stopped).
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
      assert.ok(handler);
      return handler;
    };

    /**
     * An engine running the real handler, whose look may be held (`hold`), and the outcome its look
     * reaches replaced by `outcome` when given.
     */
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
        .innerJoin('operations', 'operations.customer_uid', 'customers.uid')
        .select(['customers.status', 'projects.state', 'users.platform_state', 'operations.status as operation', 'operations.lease_owner'])
        .where('customers.id', '=', id)
        .where('customers.partner_id', '=', 'acme')
        .executeTakeFirstOrThrow();
    const eventsFor = async (id: string) => (await eventsOf(server, 'acme')).filter((e) => e.data.customer_id === id);

    test('a success settles the customer, its first project and owner, the operation and its event at once', async () => {
      const { operation } = await createCustomer(server, acme.live, 'oneshot', { project: 'web' });
      const engine = engineWith();
      assert.equal(await engine.runDue(), 1);
      assert.deepEqual(await rows('oneshot'), {
        status: 'active',
        state: 'ready',
        platform_state: 'ready',
        operation: 'succeeded',
        lease_owner: null,
      });
      const read = await partnerApi<{ data: { projects: Record<string, unknown>[] } }>(server, 'GET', '/customers/oneshot', {
        token: acme.live,
      });
      const events = await eventsFor('oneshot');
      assert.deepEqual(
        events.map((e) => e.type),
        ['customer.ready'],
      );
      // The project's view in the event is the one the API shows (toProject), to the millisecond.
      assert.deepEqual(events[0]?.data, {
        customer_id: 'oneshot',
        operation_id: operation.id,
        project: read.body.data.projects[0],
        state: 'active',
        error: null,
      });
    });

    test("a failure settles them failed at once, with the failure's code in the event", async () => {
      const { operation } = await createCustomer(server, acme.live, 'oneshot-failed');
      const engine = engineWith({
        outcome: { state: 'failed', code: 'PROVISIONING_FAILED', message: 'the platform refused' },
      });
      assert.equal(await engine.runDue(), 1);
      const settled = await rows('oneshot-failed');
      assert.deepEqual(
        { status: settled.status, state: settled.state, operation: settled.operation },
        { status: 'failed', state: 'failed', operation: 'failed' },
      );
      const [event] = await eventsFor('oneshot-failed');
      assert.equal(event?.type, 'customer.failed');
      assert.deepEqual(event?.data.error, { code: 'PROVISIONING_FAILED', message: 'the platform refused' });
      assert.equal(event?.data.operation_id, operation.id);
      assert.equal((event?.data.project as { state?: string } | null)?.state, 'failed');
    });

    test('a look whose lease was taken back writes nothing: the transaction finds the lease lost', async () => {
      await createCustomer(server, acme.live, 'oneshot-late');
      const held = heldLook();
      const engine = engineWith(held);
      const pass = engine.runDue();
      await held.reached;
      // A deletion's way of taking the lease back while the look runs.
      const { uid } = await server.database.db
        .selectFrom('customers')
        .select('uid')
        .where('id', '=', 'oneshot-late')
        .executeTakeFirstOrThrow();
      await expediteCustomerOperations(server.database.db, uid, server.clock.now());
      held.release();
      assert.equal(await pass, 1);
      const left = await rows('oneshot-late');
      assert.deepEqual(
        { status: left.status, state: left.state, operation: left.operation },
        { status: 'provisioning', state: 'provisioning', operation: 'pending' },
        'nothing of the settling stayed',
      );
      assert.deepEqual(await eventsFor('oneshot-late'), [], 'nor its event');
      // The next look finishes it.
      const next = engineWith();
      assert.equal(await next.runDue(), 1);
      assert.equal((await rows('oneshot-late')).status, 'active');
    });

    test('a customer deleted while its creation ran: the creation fails with CUSTOMER_DELETING', async () => {
      const { operation } = await createCustomer(server, acme.live, 'oneshot-gone');
      const held = heldLook();
      const engine = engineWith(held);
      const pass = engine.runDue();
      await held.reached;
      const deleted = await partnerApi(server, 'DELETE', '/customers/oneshot-gone?mode=immediate', { token: acme.live });
      assert.equal(deleted.status, 202, deleted.text);
      held.release();
      await pass;
      // The deletion took the lease back too: this look records nothing, the next one decides.
      await engineWith().runDue();
      const creation = await server.database.db
        .selectFrom('operations')
        .select(['status', 'error_code'])
        .where('id', '=', String(operation.id))
        .executeTakeFirstOrThrow();
      assert.deepEqual(creation, { status: 'failed', error_code: 'CUSTOMER_DELETING' });
      const failed = (await eventsFor('oneshot-gone')).find((e) => e.type === 'customer.failed');
      assert.equal((failed?.data.error as { code?: string } | undefined)?.code, 'CUSTOMER_DELETING');
    });
  });
}
