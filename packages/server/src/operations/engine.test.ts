import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { createCustomer, eventually, partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import { systemClock } from '../infra/clock.ts';
import { type FinalOutcome, OperationEngine, type OperationHandler } from './engine.ts';

/**
 * The engine's leases, on a server whose own engine is stopped: these engines stand for processes
 * (one that hangs in a platform call, one killed mid-look, the one started after it).
 */
interface Gate {
  entered: Promise<void>;
  open(outcome: FinalOutcome): void;
}

/** A `customer.create` handler whose look waits until the test opens the gate. */
function gatedHandler(): { handler: OperationHandler; gate: Gate; looks: () => number } {
  let looks = 0;
  let entered!: () => void;
  let open!: (outcome: FinalOutcome) => void;
  const enteredP = new Promise<void>((resolve) => {
    entered = resolve;
  });
  const outcomeP = new Promise<FinalOutcome>((resolve) => {
    open = resolve;
  });
  return {
    handler: {
      advance: async () => {
        looks++;
        entered();
        return outcomeP;
      },
      lock: async () => undefined,
      finish: async (_trx, _op, outcome) => ({ outcome }),
    },
    gate: { entered: enteredP, open },
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

    const engine = (options: { exclusive?: boolean; leaseMs?: number; real?: boolean } = {}) =>
      new OperationEngine({
        db: server.database.db,
        clock: options.real ? systemClock : server.clock,
        logger: server.services.options.logger,
        concurrency: 1,
        ...options,
      });
    const lease = async (id: string) =>
      server.database.db
        .selectFrom('operations')
        .select(['status', 'lease_owner', 'lease_until'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();

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
  });
}
