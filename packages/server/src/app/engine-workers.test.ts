import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startTestServer, testDatabases } from '../../test/harness.ts';
import { createCustomer, partnerWithModes, waitForOperation } from '../../test/provisioning.ts';
import type { CustomerSpec, Platform, PlatformContext } from '../platform/platform.ts';
import type { SandboxPlatform } from '../platform/sandbox/sandbox-platform.ts';

/** The sandbox, but a new customer's call first awaits `hold(spec)`: the test decides when each goes on. */
function gated(hold: (spec: CustomerSpec) => Promise<void>) {
  return (sandbox: SandboxPlatform) =>
    new Proxy(sandbox, {
      get(platform, property) {
        if (property === 'provisionCustomer')
          return async (ctx: PlatformContext, spec: CustomerSpec) => {
            await hold(spec);
            return platform.provisionCustomer(ctx, spec);
          };
        const value = Reflect.get(platform, property);
        return typeof value === 'function' ? value.bind(platform) : value;
      },
    }) as Platform;
}

/**
 * How many operations a process works on at once when TENANTRY_ENGINE_CONCURRENCY is unset (decision
 * 262): eight on a PostgreSQL server, one on the embedded database's one connection. The platform here
 * holds every new customer's call until the test lets them go, so what is in flight at once is what
 * the engine started, counted where it happens.
 */
for (const target of testDatabases()) {
  const expected = target.name === 'pglite' ? 1 : 8;
  describe(`the engine's workers by default [${target.name}]`, () => {
    test(`${expected} operation${expected === 1 ? '' : 's'} at once, no more, and each finishes once let go`, async () => {
      let inFlight = 0;
      let most = 0;
      const held: (() => void)[] = [];
      const server = await startTestServer(target, {
        livePlatform: gated(async () => {
          inFlight++;
          most = Math.max(most, inFlight);
          await new Promise<void>((resolve) => held.push(resolve));
          inFlight--;
        }),
      });
      try {
        const tokens = await partnerWithModes(server, 'workers');
        const created = [];
        for (let i = 0; i < expected + 2; i++) created.push(await createCustomer(server, tokens.live, `workers-${i}`));
        // The engine's background pass takes them up; wait until it holds as many as it will.
        const deadline = Date.now() + 10_000;
        while (held.length < expected && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
        assert.equal(held.length, expected, `the engine held ${held.length} operations at once`);
        // Let them go one by one; each let-go frees a worker for the next waiting operation.
        const finishing = created.map((c, i) => waitForOperation(server, tokens.live, `workers-${i}`, c.operation.id, 20_000));
        let allFinished = false;
        const releasing = (async () => {
          while (!allFinished) {
            held.shift()?.();
            await new Promise((resolve) => setTimeout(resolve, 1));
          }
        })();
        const finished = await Promise.all(finishing).finally(() => {
          allFinished = true;
        });
        await releasing;
        for (const operation of finished) assert.equal(operation.status, 'succeeded');
        assert.equal(most, expected, `at most ${most} operations were in the platform's hands at once`);
      } finally {
        for (const release of held) release();
        await server.stop();
      }
    });
  });
}

for (const target of testDatabases()) {
  // The embedded database's engine has one worker: a look that waits holds it, by design.
  const skip = target.name === 'pglite' ? 'one worker on the embedded database' : false;
  describe(`a slow look holds one worker, not the others [${target.name}]`, () => {
    test('customers created while one look waits on the platform are provisioned meanwhile', { skip }, async () => {
      let letGo = () => {};
      const stuck = new Promise<void>((resolve) => {
        letGo = resolve;
      });
      let reached = () => {};
      const reachedStuck = new Promise<void>((resolve) => {
        reached = resolve;
      });
      const server = await startTestServer(target, {
        livePlatform: gated(async (spec) => {
          if (spec.organization.customerId !== 'slow') return;
          reached();
          await stuck;
        }),
      });
      try {
        const tokens = await partnerWithModes(server, 'lines');
        const slow = await createCustomer(server, tokens.live, 'slow');
        await reachedStuck;
        // Each created after the engine's worker took the slow one: they are claimed by later passes.
        for (let i = 0; i < 3; i++) {
          const { operation } = await createCustomer(server, tokens.live, `quick-${i}`);
          const finished = await waitForOperation(server, tokens.live, `quick-${i}`, operation.id);
          assert.equal(finished.status, 'succeeded');
        }
        letGo();
        const finished = await waitForOperation(server, tokens.live, 'slow', slow.operation.id);
        assert.equal(finished.status, 'succeeded');
      } finally {
        letGo();
        await server.stop();
      }
    });
  });
}
