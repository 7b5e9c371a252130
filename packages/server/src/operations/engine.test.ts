import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { createCustomer, eventually, partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import { type Database, wholeDatabase } from '../app/database.ts';
import { newEvent } from '../events/payloads.ts';
import { systemClock } from '../infra/clock.ts';
import { OperationEngine } from './engine.ts';
import type { OperationHandler, StepOutcome } from './handler.ts';
import { expediteCustomerOperations } from './store.ts';

/**
 * The engine's leases, on a server whose own engine is stopped: these engines stand for processes
 * (one that hangs in a platform call, one killed mid-look, the one started after it).
 */
interface Gate {
  /** Settles when a look has reached the gate. */
  entered: Promise<void>;
  /** Lets the look go on with what it found. */
  open(outcome: StepOutcome): void;
}

/** A gate for one look: the look calls `pass`, which answers once the test opens the gate. */
function newGate(): Gate & { pass(): Promise<StepOutcome> } {
  let enter!: () => void;
  let open!: (outcome: StepOutcome) => void;
  const entered = new Promise<void>((resolve) => {
    enter = resolve;
  });
  const outcome = new Promise<StepOutcome>((resolve) => {
    open = resolve;
  });
  return {
    entered,
    open,
    pass: () => {
      enter();
      return outcome;
    },
  };
}

/** A `customer.create` handler whose look waits until the test opens the gate (and whose finish is `finish`). */
function gatedHandler(finish: OperationHandler<unknown, Database>['finish'] = async (_trx, _op, outcome) => ({ outcome })): {
  handler: OperationHandler<unknown, Database>;
  gate: Gate;
  looks: () => number;
} {
  let looks = 0;
  const gate = newGate();
  return {
    handler: {
      advance: async () => {
        looks++;
        return gate.pass();
      },
      lock: async () => undefined,
      finish,
    },
    gate,
    looks: () => looks,
  };
}

const doneHandler: OperationHandler = {
  advance: async () => ({ state: 'done' }),
  lock: async () => undefined,
  finish: async (_trx, _op, outcome) => ({ outcome }),
};

for (const target of testDatabases()) {
  describe(`operation leases [${target.name}]`, () => {
    let server: TestServer;
    let acme: Tokens;
    before(async () => {
      server = await startTestServer(target);
      acme = await partnerWithModes(server, 'acme');
      await server.services.engine.stop();
    });
    after(() => server.stop());

    const engine = (options: { exclusive?: boolean; leaseMs?: number; real?: boolean; concurrency?: number } = {}) =>
      new OperationEngine({
        db: server.database.db,
        clock: options.real ? systemClock : server.clock,
        logger: server.services.options.logger,
        concurrency: 1,
        recordEvent: (trx, event) => server.services.events.record(wholeDatabase(trx), event),
        ...options,
      });
    const lease = async (id: string) =>
      server.database.db
        .selectFrom('operations')
        .select(['status', 'lease_owner', 'lease_until'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const customerUid = async (id: string) =>
      (await server.database.db.selectFrom('customers').select('uid').where('id', '=', id).executeTakeFirstOrThrow()).uid;

    test('a look that takes longer than the lease keeps its operation: the lease is renewed while it runs', async () => {
      const { operation } = await createCustomer(server, acme.live, 'slowpoke');
      const { handler, gate } = gatedHandler();
      const slow = engine({ leaseMs: 400, real: true });
      slow.register('customer.create', handler);
      const pass = slow.runDue();
      await gate.entered;
      const first = await lease(String(operation.id));
      assert.ok(first.lease_owner && first.lease_until);
      // Well past the first lease's end, the same process still holds it, later.
      const renewed = await eventually(
        () => lease(String(operation.id)),
        (row) => row.lease_until !== null && row.lease_until.getTime() >= (first.lease_until?.getTime() ?? 0) + 400,
      );
      assert.equal(renewed.lease_owner, first.lease_owner);
      const other = engine({ real: true });
      other.register('customer.create', doneHandler);
      assert.equal(await other.runDue(), 0, 'another process cannot take a renewed operation');
      gate.open({ state: 'done' });
      assert.equal(await pass, 1);
      assert.equal((await lease(String(operation.id))).status, 'succeeded');
    });

    test('after a kill, a process that alone opens the database takes the left operations over at start', async () => {
      const { operation } = await createCustomer(server, acme.live, 'orphan');
      const { handler, gate } = gatedHandler();
      const killed = engine();
      killed.register('customer.create', handler);
      const pass = killed.runDue();
      await gate.entered;
      assert.ok((await lease(String(operation.id))).lease_owner, 'the killed process held it');

      // A process sharing the database (PostgreSQL) waits for the lease to run out...
      const shared = engine();
      shared.register('customer.create', doneHandler);
      assert.equal(await shared.runDue(), 0);
      assert.equal((await lease(String(operation.id))).status, 'pending');

      // ...the embedded database's only process gives it back at start and finishes it at once.
      const successor = engine({ exclusive: true });
      successor.register('customer.create', doneHandler);
      await successor.start(60_000);
      await successor.stop();
      assert.equal((await lease(String(operation.id))).status, 'succeeded');

      // The killed look's outcome, had it come, is not recorded twice.
      gate.open({ state: 'failed', code: 'PROVISIONING_FAILED', message: 'late' });
      await pass;
      assert.equal((await lease(String(operation.id))).status, 'succeeded');
    });

    test('a process with TENANTRY_ENGINE_CONCURRENCY=0 runs no operations; one sharing the database does', async () => {
      const { operation } = await createCustomer(server, acme.live, 'elsewhere');
      const id = String(operation.id);
      const apiOnly = engine({ concurrency: 0 });
      apiOnly.register('customer.create', doneHandler);
      await apiOnly.start(60_000);
      apiOnly.kick(); // what opening an operation in this process does
      await apiOnly.stop(); // waits for a pass, had one started
      assert.deepEqual(await lease(id), { status: 'pending', lease_owner: null, lease_until: null }, 'not claimed, not looked at');

      const worker = engine();
      worker.register('customer.create', doneHandler);
      await worker.start(60_000);
      await worker.stop();
      assert.equal((await lease(id)).status, 'succeeded');
    });

    test('a server started with TENANTRY_ENGINE_CONCURRENCY=0 says so and leaves a new creation to another process', {
      skip: target.name === 'pglite' && 'an API-only process needs a PostgreSQL server (the embedded database refuses 0: settings.test.ts)',
    }, async () => {
      const apiOnly = await startTestServer(target, { env: { TENANTRY_ENGINE_CONCURRENCY: '0' } });
      try {
        assert.ok(apiOnly.logs.some((line) => String(line.msg).startsWith('operation engine off in this process')));
        const partner = await partnerWithModes(apiOnly, 'apionly');
        const { operation } = await createCustomer(apiOnly, partner.live, 'waiting');
        await apiOnly.services.engine.stop(); // waits for a pass, had one started
        const row = await apiOnly.database.db
          .selectFrom('operations')
          .select(['status', 'lease_owner'])
          .where('id', '=', String(operation.id))
          .executeTakeFirstOrThrow();
        assert.deepEqual(row, { status: 'pending', lease_owner: null });
      } finally {
        await apiOnly.stop();
      }
    });

    test('a pass asked for explicitly (the test clock) runs even with TENANTRY_ENGINE_CONCURRENCY=0', async () => {
      const { operation } = await createCustomer(server, acme.live, 'asked');
      const apiOnly = engine({ concurrency: 0 });
      apiOnly.register('customer.create', doneHandler);
      assert.equal(await apiOnly.runDue({ id: 'acme', mode: 'live' }), 1);
      assert.equal((await lease(String(operation.id))).status, 'succeeded');
    });

    test('a look whose lease was taken back records nothing: not its outcome, its event, or what its finish wrote', async () => {
      const { operation } = await createCustomer(server, acme.live, 'latecomer');
      const id = String(operation.id);
      const { handler, gate } = gatedHandler(async (trx, op, outcome, ctx) => {
        await trx.updateTable('customers').set({ display_name: 'written by a lost look' }).where('uid', '=', op.customer_uid).execute();
        const event = newEvent({
          partnerId: op.partner_id,
          mode: op.mode,
          type: 'customer.failed',
          at: ctx.now,
          data: { customer_id: op.customer_id, operation_id: op.id, project: null, state: 'failed', error: null },
        });
        return { outcome, event };
      });
      const late = engine();
      late.register('customer.create', handler);
      const pass = late.runDue();
      await gate.entered;
      // A deletion takes the lease back while the look runs (its operations are looked at again at once).
      const uid = await customerUid('latecomer');
      await expediteCustomerOperations(server.database.db, uid, server.clock.now());
      gate.open({ state: 'failed', code: 'PROVISIONING_FAILED', message: 'late' });
      assert.equal(await pass, 1);

      assert.equal((await lease(id)).status, 'pending', 'the outcome is not recorded');
      const events = await server.database.db
        .selectFrom('events')
        .select('type')
        .where('partner_id', '=', 'acme')
        .where(sql<boolean>`data->>'operation_id' = ${id}`)
        .execute();
      assert.deepEqual(events, [], 'nor its event');
      const row = await server.database.db.selectFrom('customers').select('display_name').where('uid', '=', uid).executeTakeFirstOrThrow();
      assert.equal(row.display_name, null, 'nor what its finish wrote');
    });

    test('when the same process claims an operation again while a stale look of it runs, only the new look records', async () => {
      // A deletion takes the lease back mid-look and the same process (another of its workers, or a
      // pass the test clock asks for) claims the operation at once. The stale look answers first, "not
      // before an hour from now"; the new one then fails the creation. The stale answer is not
      // recorded, and the failure is: each claim is its own lease, not the process's.
      const { operation } = await createCustomer(server, acme.live, 'reclaimed');
      const id = String(operation.id);
      const [staleGate, freshGate] = [newGate(), newGate()];
      const queue = [staleGate, freshGate];
      const process = engine({ concurrency: 2 });
      process.register('customer.create', {
        advance: async (op) => {
          if (op.id !== id) return { state: 'done' }; // an earlier test's operation
          const gate = queue.shift();
          assert.ok(gate, 'looked at more than twice');
          return gate.pass();
        },
        lock: async () => undefined,
        finish: async (_trx, _op, outcome) => ({ outcome }),
      });
      const stale = process.runDue();
      await staleGate.entered;
      await expediteCustomerOperations(server.database.db, await customerUid('reclaimed'), server.clock.now());
      const fresh = process.runDue();
      await freshGate.entered;
      staleGate.open({ state: 'in_progress', until: new Date(server.clock.nowMs() + 3_600_000) });
      await stale;
      freshGate.open({ state: 'failed', code: 'CUSTOMER_DELETING', message: 'the customer is being deleted' });
      await fresh;

      const row = await server.database.db
        .selectFrom('operations')
        .select(['status', 'error_code', 'lease_owner'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { status: 'failed', error_code: 'CUSTOMER_DELETING', lease_owner: null });
    });
  });
}
