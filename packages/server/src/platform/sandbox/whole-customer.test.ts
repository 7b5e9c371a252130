import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { testDatabases } from '../../../test/harness.ts';
import { migrate } from '../../app/database.ts';
import type { CustomerSpec, PlatformContext } from '../platform.ts';
import { SandboxPlatform } from './sandbox-platform.ts';

/**
 * The sandbox takes a new customer whole in one statement a look, and leaves to the calls
 * one by one what that statement does not decide. The conformance suite holds it to what the calls
 * make; these are the sandbox's own cases, on both databases.
 */
for (const target of testDatabases()) {
  describe(`the sandbox takes a customer whole [${target.name}]`, () => {
    let database: Awaited<ReturnType<(typeof target)['create']>>['handle'];
    let drop: () => Promise<void>;
    let sandbox: SandboxPlatform;
    let n = 0;
    const ctx: PlatformContext = { partnerId: 'whole', mode: 'live', now: new Date(Date.UTC(2026, 10, 28)) };
    const customer = (): CustomerSpec => {
      n++;
      const org = { customerId: `c${n}`, organization: `whole-c${n}` };
      return {
        organization: { ...org, displayName: `Customer ${n}`, planId: 'performance' },
        quota: {
          planId: 'performance',
          quota: { vcpu: 8, memory_gib: 32, storage_gib: 200, gpus: {} },
          projectCaps: { default: { vcpu: 4 } },
        },
        owner: { ...org, username: 'owner', email: `owner@c${n}.example`, role: 'admin', isOwner: true, firstName: null, lastName: null },
        project: { ...org, project: 'default', namespace: `${org.organization}-default` },
      };
    };

    before(async () => {
      ({ handle: database, drop } = await target.create());
      await migrate(database.db);
      sandbox = new SandboxPlatform({ db: database.db, delayMs: 0, addressRanges: 16 });
    });
    after(() => drop());

    test('with no delay, one call makes it all: the organization with its plan and quota, the owner, the project and its range', async () => {
      const spec = customer();
      const whole = await sandbox.provisionCustomer(ctx, spec);
      assert.equal(whole?.state, 'done');
      assert.match(whole?.cidr ?? '', /^10\.0\.\d+\.0\/24$/);
      assert.deepEqual(await sandbox.appliedQuota(ctx, spec.organization), {
        planId: 'performance',
        quota: spec.quota.quota,
        projectCaps: spec.quota.projectCaps,
      });
      assert.deepEqual(await sandbox.ensureUser(ctx, spec.owner), { state: 'done' });
      assert.deepEqual(await sandbox.reserveAddressRange(ctx, spec.project), { state: 'done', cidr: whole?.cidr });
      // A later look (a repeat after a crash) with a changed quota: the same range, the new quota.
      const changed = { ...spec, quota: { ...spec.quota, quota: { ...spec.quota.quota, vcpu: 16 } } };
      assert.deepEqual(await sandbox.provisionCustomer(ctx, changed), whole);
      assert.equal((await sandbox.appliedQuota(ctx, spec.organization)).quota.vcpu, 16);
    });

    test('with a delay, each look goes as far as the calls would: the organization, then the owner, range and project, then done', async () => {
      const slow = new SandboxPlatform({ db: database.db, delayMs: 3000, addressRanges: 16 });
      const spec = customer();
      const at = (ms: number): PlatformContext => ({ ...ctx, now: new Date(ctx.now.getTime() + ms) });
      // The organization takes 3 s: nothing of the customer's realm or network before it is ready.
      assert.deepEqual(await slow.provisionCustomer(at(0), spec), { state: 'in_progress', until: at(3000).now, cidr: null });
      assert.equal((await slow.ensureUser(at(0), spec.owner)).state, 'in_progress', 'no owner yet');
      const ranges = await database.db
        .selectFrom('sandbox_address_ranges')
        .select('cidr')
        .where('namespace', '=', spec.project.namespace)
        .execute();
      assert.deepEqual(ranges, [], 'no range yet');
      // Ready: the owner and the project's range, the project itself 2 s from its start.
      const next = await slow.provisionCustomer(at(3000), spec);
      assert.equal(next?.state, 'in_progress');
      assert.match(next?.cidr ?? '', /^10\.0\.\d+\.0\/24$/);
      assert.deepEqual(await slow.ensureUser(at(3000), spec.owner), { state: 'done' });
      assert.deepEqual(await slow.provisionCustomer(at(5000), spec), { state: 'done', cidr: next?.cidr });
    });

    test('customers taken at once get distinct ranges (a clash is asked again)', async () => {
      const specs = Array.from({ length: 8 }, customer);
      const answers = await Promise.all(specs.map((spec) => sandbox.provisionCustomer(ctx, spec)));
      assert.ok(
        answers.every((answer) => answer?.state === 'done'),
        JSON.stringify(answers),
      );
      const cidrs = answers.map((answer) => (answer?.state === 'done' ? answer.cidr : ''));
      assert.equal(new Set(cidrs).size, 8, cidrs.join(' '));
    });

    test('what the calls decide is left to them: a failure that may be injected, an organization torn down, a full pool', async () => {
      // Test mode's customer.create may carry an injected failure: never taken whole.
      const testCtx: PlatformContext = {
        ...ctx,
        mode: 'test',
        operation: { id: 'op_1', type: 'customer.create', customerId: 'x', project: 'default', createdAt: ctx.now },
      };
      assert.equal(await sandbox.provisionCustomer(testCtx, customer()), undefined);

      // An organization of the name torn down: the calls make a new one.
      const spec = customer();
      assert.equal((await sandbox.provisionCustomer(ctx, spec))?.state, 'done');
      const later = (ms: number): PlatformContext => ({ ...ctx, now: new Date(ctx.now.getTime() + ms) });
      assert.deepEqual(await sandbox.deleteOrganization(later(1), spec.organization), { state: 'done' });
      assert.equal(await sandbox.provisionCustomer(later(2), spec), undefined);
      assert.deepEqual(await sandbox.ensureOrganization(later(2), spec.organization), { state: 'done' });

      // No range left (16 in all): the allocator's locked path answers NO_ADDRESS_SPACE.
      let last: Awaited<ReturnType<SandboxPlatform['provisionCustomer']>>;
      do last = await sandbox.provisionCustomer(ctx, customer());
      while (last?.state === 'done');
      assert.equal(last, undefined);
      const full = customer();
      const range = await sandbox.reserveAddressRange(ctx, full.project);
      assert.equal(range.state === 'failed' && range.code, 'NO_ADDRESS_SPACE');
    });
  });
}
