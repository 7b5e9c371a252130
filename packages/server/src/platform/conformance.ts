import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { KeyMode } from '../infra/mode.ts';
import {
  type OrganizationRef,
  type Platform,
  type PlatformContext,
  type Progress,
  type ProjectRef,
  type UserSpec,
  workloadsRunning,
} from './platform.ts';

/**
 * The platform conformance suite: what every driver must do, whatever it drives. The engine and
 * the services rely on exactly these behaviours, so a driver that passes them can be routed to
 * without touching anything else. `platform/sandbox/` runs it on the sandbox; a new driver runs it
 * on its doubles (and, where an operator points it at one, on a real cluster).
 */
export interface ConformanceHarness {
  platform: Platform;
  /** The mode the suite's objects live in (the sandbox's failure injection is test-mode only). */
  mode: KeyMode;
  partnerId: string;
  /** The clock calls are made at; `wait` moves it (a simulated clock) or waits for it (a real one). */
  now(): Date;
  wait(until: Date): Promise<void>;
  /** Live workloads for an organization, the driver's way (the sandbox's helper; VMs on a cluster). */
  addWorkloads(org: OrganizationRef, workloads: { vms: string[]; databases: string[]; gpus: Record<string, number> }): Promise<void>;
  /** The identity provider's pending actions for a user. */
  setRequiredActions(user: { organization: string; customerId: string; username: string }, actions: string[]): Promise<void>;
  /** Makes the next provisioning step of this kind fail with `code` (a platform refusal). */
  failNext(kind: 'customer.create' | 'project.create', code: string): Promise<void>;
  /** How many address ranges the harness gave the driver (NO_ADDRESS_SPACE is reached past them). */
  addressRanges: number;
  close(): Promise<void>;
}

/** The image the suite's VMs boot. */
const IMAGE = {
  osName: 'Ubuntu 24.04 LTS',
  url: 'https://images.example/ubuntu-24.04.img',
  cloudUser: 'ubuntu',
  firmware: 'bios' as const,
  machineType: 'q35',
  features: ['acpi'],
  cloudInit: '#cloud-config\n',
  bootOrder: ['disk'],
  additionalDisks: null,
};

/** Runs every conformance test against the harness `open` builds (once for the suite). */
export function platformConformance(name: string, open: () => Promise<ConformanceHarness>): void {
  describe(`platform conformance: ${name}`, () => {
    let h: ConformanceHarness;
    let n = 0;
    before(async () => {
      h = await open();
    });
    after(() => h.close());

    const ctx = (operation?: PlatformContext['operation']): PlatformContext => ({
      partnerId: h.partnerId,
      mode: h.mode,
      now: h.now(),
      ...(operation ? { operation } : {}),
    });
    const newOrg = (): OrganizationRef => {
      n++;
      return { customerId: `conf${n}`, organization: `conformance-conf${n}` };
    };
    const projectOf = (org: OrganizationRef, project = 'default'): ProjectRef => ({
      ...org,
      project,
      namespace: `${org.organization}-${project}`,
    });
    const owner = (org: OrganizationRef, username = 'owner'): UserSpec => ({
      ...org,
      username,
      email: `${username}@${org.customerId}.example`,
      role: 'admin',
      isOwner: username === 'owner',
      firstName: null,
      lastName: null,
    });
    /** Asks until the call reports more than progress, waiting as it says; what it finally reported. */
    const settle = async (call: (c: PlatformContext) => Promise<Progress>, operation?: PlatformContext['operation']): Promise<Progress> => {
      for (let i = 0; i < 100; i++) {
        const progress = await call(ctx(operation));
        if (progress.state !== 'in_progress') return progress;
        await h.wait(progress.until);
      }
      assert.fail('the call kept reporting progress');
    };
    const operation = (type: 'customer.create' | 'project.create', org: OrganizationRef, project: string | null = null) => ({
      id: `op_conformance_${n}`,
      type,
      customerId: org.customerId,
      project,
      createdAt: h.now(),
    });
    /** An organization with its owner and first project, ready. */
    const readyOrganization = async () => {
      const org = newOrg();
      assert.deepEqual(await settle((c) => h.platform.ensureOrganization(c, { ...org, displayName: null, planId: 'standard' })), {
        state: 'done',
      });
      assert.deepEqual(await settle((c) => h.platform.ensureUser(c, owner(org))), { state: 'done' });
      const project = projectOf(org);
      const range = await h.platform.reserveAddressRange(ctx(), project);
      assert.equal(range.state, 'done');
      const cidr = range.state === 'done' ? range.cidr : '';
      assert.deepEqual(await settle((c) => h.platform.ensureProject(c, { ...project, cidr })), { state: 'done' });
      return { org, project, cidr };
    };

    test('an organization, its owner and a project become ready, and every create is idempotent', async () => {
      const { org, project, cidr } = await readyOrganization();
      // Asked again (a repeat after a crash), each finds what the first made.
      assert.deepEqual(await h.platform.ensureOrganization(ctx(), { ...org, displayName: null, planId: 'standard' }), { state: 'done' });
      assert.deepEqual(await h.platform.ensureUser(ctx(), owner(org)), { state: 'done' });
      const again = await h.platform.reserveAddressRange(ctx(), project);
      assert.deepEqual(again, { state: 'done', cidr }, 'the same range on every repeat');
      assert.deepEqual(await h.platform.ensureProject(ctx(), { ...project, cidr }), { state: 'done' });
    });

    test('a customer taken whole (`provisionCustomer`, where the driver has it) is what the calls one by one make', async (t) => {
      const provision = h.platform.provisionCustomer?.bind(h.platform);
      if (!provision) return t.skip('this driver takes a customer one call at a time');
      const org = newOrg();
      const project = projectOf(org);
      const spec = {
        organization: { ...org, displayName: 'Whole & Co', planId: 'performance' },
        quota: { planId: 'performance', quota: { vcpu: 8, memory_gib: 32, storage_gib: 200, gpus: {} }, projectCaps: {} },
        owner: owner(org),
        project,
      };
      // Asked until it is all there, as the engine's looks do; each answer is progress, never a failure.
      let answer = await provision(ctx(), spec);
      for (let i = 0; i < 100 && answer?.state === 'in_progress'; i++) {
        await h.wait(answer.until);
        answer = await provision(ctx(), spec);
      }
      assert.equal(answer?.state, 'done', JSON.stringify(answer));
      const cidr = answer?.state === 'done' ? answer.cidr : '';
      // The calls one by one find it all there: the organization, its owner, the project and its range.
      assert.deepEqual(await h.platform.ensureOrganization(ctx(), spec.organization), { state: 'done' });
      assert.deepEqual(await h.platform.applyQuota(ctx(), org, spec.quota), { state: 'done' });
      assert.deepEqual(await h.platform.ensureUser(ctx(), spec.owner), { state: 'done' });
      assert.deepEqual(await h.platform.reserveAddressRange(ctx(), project), { state: 'done', cidr });
      assert.deepEqual(await h.platform.ensureProject(ctx(), { ...project, cidr }), { state: 'done' });
      assert.equal((await h.platform.prepareConsoleLogin(ctx(), spec.owner)).state, 'ready');
      assert.deepEqual(await provision(ctx(), spec), { state: 'done', cidr }, 'a repeat finds it whole, with the same range');

      // Begun one call at a time (an organization only), finished whole: the same end.
      const half = newOrg();
      await settle((c) => h.platform.ensureOrganization(c, { ...half, displayName: null, planId: 'standard' }));
      const rest = await settle(async (c) => {
        const whole = await provision(c, {
          ...spec,
          organization: { ...half, displayName: null, planId: 'standard' },
          owner: owner(half),
          project: projectOf(half),
        });
        if (whole?.state === 'in_progress') return whole;
        return whole ? { state: 'done' } : { state: 'failed', code: 'PROVISIONING_FAILED', message: 'not taken whole' };
      });
      assert.deepEqual(rest, { state: 'done' });
      assert.deepEqual(await h.platform.ensureUser(ctx(), owner(half)), { state: 'done' });
      const range = await h.platform.reserveAddressRange(ctx(), projectOf(half));
      assert.equal(range.state, 'done');
      assert.notEqual(range.state === 'done' ? range.cidr : cidr, cidr, 'each project its own range');
    });

    test('address ranges: one per namespace, distinct, released by a project deletion, NO_ADDRESS_SPACE when none is left', async () => {
      const { org, project, cidr } = await readyOrganization();
      const seen = new Set([cidr]);
      let exhausted: Progress | undefined;
      for (let i = 0; i < h.addressRanges + 1 && !exhausted; i++) {
        const range = await h.platform.reserveAddressRange(ctx(), projectOf(org, `extra${i}`));
        if (range.state !== 'done') exhausted = range;
        else {
          assert.ok(!seen.has(range.cidr), `range ${range.cidr} handed out twice`);
          seen.add(range.cidr);
        }
      }
      assert.equal(exhausted?.state, 'failed');
      assert.equal(exhausted?.state === 'failed' ? exhausted.code : '', 'NO_ADDRESS_SPACE');
      assert.deepEqual(await settle((c) => h.platform.deleteProject(c, project)), { state: 'done' });
      const freed = await h.platform.reserveAddressRange(ctx(), projectOf(org, 'after-delete'));
      assert.deepEqual(freed, { state: 'done', cidr }, "a deleted project's range is free again");
      for (let i = 0; i < h.addressRanges; i++) await settle((c) => h.platform.deleteProject(c, projectOf(org, `extra${i}`)));
      await settle((c) => h.platform.deleteProject(c, projectOf(org, 'after-delete')));
    });

    test('workloads: listed, stopped by a suspension, started again, counted, and their GPUs reported', async () => {
      const { org } = await readyOrganization();
      const none = await h.platform.listWorkloads(ctx(), org);
      assert.deepEqual([none.vms, none.databases], [[], []]);
      await h.addWorkloads(org, { vms: ['vm-a', 'vm-b'], databases: ['db-a'], gpus: { 'a100-40gb': 1 } });
      const live = await h.platform.listWorkloads(ctx(), org);
      // A driver may qualify a name with where it lives (`namespace/vm-a`).
      const names = (list: string[]) => list.map((name) => name.split('/').at(-1)).toSorted();
      assert.deepEqual([names(live.vms), names(live.databases)], [['vm-a', 'vm-b'], ['db-a']]);
      assert.equal(workloadsRunning(live), 3);
      assert.deepEqual(await h.platform.gpuUsage(ctx(), org), { 'a100-40gb': 1 });
      const stopped = await h.platform.stopWorkloads(ctx(), org);
      assert.equal(workloadsRunning(stopped), 0, 'nothing runs after a stop');
      assert.deepEqual(await h.platform.gpuUsage(ctx(), org), {}, 'stopped workloads hold no GPU');
      assert.equal(workloadsRunning(await h.platform.stopWorkloads(ctx(), org)), 0, 'a repeated stop is harmless');
      const started = await h.platform.startWorkloads(ctx(), org);
      assert.equal(workloadsRunning(started), 3, 'what the stop stopped runs again');
    });

    test('a VM from an image: made once (a repeat is done), another of its name refused, listed, and refused past the quota', async () => {
      const { org, project } = await readyOrganization();
      const image = IMAGE;
      const quota = { customer: { vcpu: 4, memory_gib: 8, storage_gib: 100 }, project: { vcpu: 3 } };
      const vm = { ...org, namespace: project.namespace, name: 'web-1', vcpu: 2, memoryGib: 4, storageGib: 20, image, quota };
      assert.deepEqual(await h.platform.createVm(ctx(), vm), { state: 'done' });
      assert.deepEqual(await h.platform.createVm(ctx(), vm), { state: 'done' }, 'the same VM asked again');
      const other = await h.platform.createVm(ctx(), { ...vm, vcpu: 1 });
      assert.equal(other.state === 'refused' && other.code, 'ALREADY_EXISTS');
      const listed = await h.platform.listWorkloads(ctx(), org);
      assert.deepEqual(listed.vms, [`${project.namespace}/web-1`], 'listed once, by namespace and name');
      const overCap = await h.platform.createVm(ctx(), { ...vm, name: 'web-2' });
      assert.equal(overCap.state === 'refused' && overCap.code, 'QUOTA_EXCEEDED', "2 + 2 vCPU is past the project's cap of 3");
      const fits = await h.platform.createVm(ctx(), { ...vm, name: 'web-3', vcpu: 1 });
      assert.deepEqual(fits, { state: 'done' }, 'what fits is made');
      const overQuota = await h.platform.createVm(ctx(), { ...vm, name: 'web-4', vcpu: 1, memoryGib: 1, storageGib: 70 });
      assert.equal(overQuota.state === 'refused' && overQuota.code, 'QUOTA_EXCEEDED', "40 + 70 GiB is past the customer's 100");
    });

    test('a VM stopped, started and deleted by its customer: a resume leaves a stopped VM stopped; the quota counts what exists', async () => {
      const { org, project } = await readyOrganization();
      const quota = { customer: { vcpu: 8, memory_gib: 16, storage_gib: 100 }, project: {} };
      const vm = { ...org, namespace: project.namespace, name: 'app-1', vcpu: 2, memoryGib: 4, storageGib: 20, image: IMAGE, quota };
      assert.deepEqual(await h.platform.createVm(ctx(), vm), { state: 'done' });
      assert.deepEqual(await h.platform.createVm(ctx(), { ...vm, name: 'app-2', vcpu: 1, memoryGib: 2, storageGib: 10 }), {
        state: 'done',
      });
      const ref = { ...org, namespace: project.namespace, name: 'app-1' };
      const full = `${project.namespace}/app-1`;
      const held = { vcpu: 3, memory_gib: 6, storage_gib: 30 };
      assert.deepEqual(await h.platform.heldResources(ctx(), org), { customer: held, namespaces: { [project.namespace]: held } });

      assert.deepEqual(await h.platform.stopVm(ctx(), ref), { state: 'done' });
      assert.deepEqual(await h.platform.stopVm(ctx(), ref), { state: 'done' }, 'a repeated stop is done');
      let listed = await h.platform.listWorkloads(ctx(), org);
      assert.deepEqual(listed.halted, [full], 'the stopped VM is listed, halted');
      assert.equal(workloadsRunning(listed), 1, 'the other VM still runs');
      assert.deepEqual((await h.platform.heldResources(ctx(), org)).customer, held, 'a stopped VM keeps its place in the quota');

      // A suspension and a resume: what the customer stopped stays stopped.
      assert.equal(workloadsRunning(await h.platform.stopWorkloads(ctx(), org)), 0);
      listed = await h.platform.startWorkloads(ctx(), org);
      assert.deepEqual(listed.halted, [full], 'the resume leaves the stopped VM stopped');
      assert.equal(workloadsRunning(listed), 1);

      assert.deepEqual(await h.platform.startVm(ctx(), ref), { state: 'done' });
      assert.deepEqual(await h.platform.startVm(ctx(), ref), { state: 'done' }, 'a repeated start is done');
      assert.equal(workloadsRunning(await h.platform.listWorkloads(ctx(), org)), 2);

      for (const change of ['stopVm', 'startVm'] as const) {
        const missing = await h.platform[change](ctx(), { ...ref, name: 'no-such-vm' });
        assert.equal(missing.state === 'refused' && missing.code, 'NOT_FOUND', `${change} of a VM that does not exist`);
      }
      const elsewhere = await h.platform.stopVm(ctx(), { ...ref, namespace: 'someone-else-default' });
      assert.equal(elsewhere.state === 'refused' && elsewhere.code, 'NOT_FOUND', "a namespace of none of the customer's projects");

      assert.deepEqual(await h.platform.deleteVm(ctx(), ref), { state: 'done' });
      assert.deepEqual(await h.platform.deleteVm(ctx(), ref), { state: 'done' }, 'deleting a VM that is gone is done');
      await h.wait(h.now());
      assert.deepEqual((await h.platform.listWorkloads(ctx(), org)).vms, [`${project.namespace}/app-2`]);
      const after = { vcpu: 1, memory_gib: 2, storage_gib: 10 };
      assert.deepEqual((await h.platform.heldResources(ctx(), org)).customer, after, 'its quota is free again');
      assert.deepEqual(await h.platform.createVm(ctx(), vm), { state: 'done' }, 'its name is free again');
    });

    test('usage: nothing for an organization without workloads; resource-hours while they run, bounded by the window and by deletion', async () => {
      const { org: idle } = await readyOrganization();
      const { org: busy } = await readyOrganization();
      await h.addWorkloads(busy, { vms: ['vm-usage'], databases: [], gpus: {} });
      const from = h.now();
      await h.wait(new Date(from.getTime() + 3_600_000));
      const to = h.now();
      const subjects = [idle, busy].map((org) => ({ ...org, since: new Date(0), until: null }));
      const totals = await h.platform.usage(ctx(), subjects, from, to);
      assert.ok(totals, 'the usage source answers');
      assert.equal(totals.get(idle.customerId)?.vcpu_hours, 0);
      assert.ok((totals.get(busy.customerId)?.vcpu_hours ?? 0) > 0, 'a running VM accrues vCPU hours');
      const bounded = await h.platform.usage(ctx(), [{ ...busy, since: new Date(0), until: from }], from, to);
      assert.equal(bounded?.get(busy.customerId)?.vcpu_hours, 0, 'nothing after the customer was deleted');
      // A customer deleted half-way and a new one of the same id (the same organization name): each its part.
      const mid = new Date(from.getTime() + 1_800_000);
      const split = await h.platform.usage(
        ctx(),
        [
          { ...busy, customerId: 'deleted', since: new Date(0), until: mid },
          { ...busy, customerId: 'recreated', since: mid, until: null },
        ],
        from,
        to,
      );
      const whole = totals.get(busy.customerId)?.vcpu_hours ?? 0;
      const [before, after] = [split?.get('deleted')?.vcpu_hours ?? 0, split?.get('recreated')?.vcpu_hours ?? 0];
      assert.ok(before > 0 && after > 0, `each subject has its half (${before}, ${after})`);
      assert.ok(Math.abs(before + after - whole) < 1e-6, 'the halves add up to the whole');
    });

    test('quota and plan are applied to the organization; users come and go; console logins wait for required actions', async () => {
      const { org } = await readyOrganization();
      const quota = {
        planId: 'performance',
        quota: { vcpu: 8, memory_gib: 32, storage_gib: 200, gpus: {} },
        projectCaps: { default: { vcpu: 4 } },
      };
      assert.deepEqual(await settle((c) => h.platform.applyQuota(c, org, quota)), { state: 'done' });
      assert.deepEqual(await h.platform.applyQuota(ctx(), org, quota), { state: 'done' }, 'a repeat is harmless');
      const member = { ...owner(org, 'member'), role: 'member' as const };
      assert.deepEqual(await settle((c) => h.platform.ensureUser(c, member)), { state: 'done' });
      assert.equal((await h.platform.prepareConsoleLogin(ctx(), member)).state, 'ready');
      await h.setRequiredActions(member, ['VERIFY_EMAIL']);
      assert.deepEqual(await h.platform.prepareConsoleLogin(ctx(), member), { state: 'action_required', actions: ['VERIFY_EMAIL'] });
      assert.deepEqual(await settle((c) => h.platform.deleteUser(c, member)), { state: 'done' });
      assert.deepEqual(await h.platform.deleteUser(ctx(), member), { state: 'done' }, 'deleting a user that is gone is done');
    });

    test('a refused step fails with its failure code, and a repeat reports the same outcome', async () => {
      const org = newOrg();
      await h.failNext('customer.create', 'UPSTREAM_422');
      const op = operation('customer.create', org);
      const failed = await settle((c) => h.platform.ensureOrganization(c, { ...org, displayName: null, planId: 'standard' }), op);
      assert.equal(failed.state, 'failed');
      assert.equal(failed.state === 'failed' ? failed.code : '', 'UPSTREAM_422');
      const repeated = await settle((c) => h.platform.ensureOrganization(c, { ...org, displayName: null, planId: 'standard' }), op);
      assert.deepEqual(repeated, failed, 'the outcome of a repeated look does not change');
      assert.deepEqual(await settle((c) => h.platform.deleteOrganization(c, org)), { state: 'done' });
    });

    test('an organization is torn down with everything in it; a repeat is done; a user of it cannot be made afterwards', async () => {
      const { org } = await readyOrganization();
      await h.addWorkloads(org, { vms: ['vm-x'], databases: [], gpus: {} });
      await h.platform.stopWorkloads(ctx(), org);
      assert.deepEqual(await settle((c) => h.platform.deleteOrganization(c, org)), { state: 'done' });
      assert.deepEqual(await h.platform.deleteOrganization(ctx(), org), { state: 'done' }, 'a repeated teardown is done');
      const workloads = await h.platform.listWorkloads(ctx(), org);
      assert.deepEqual([workloads.vms, workloads.databases], [[], []]);
      const orphan = await h.platform.ensureUser(ctx(), owner(org, 'late'));
      assert.equal(orphan.state, 'failed');
      assert.equal(orphan.state === 'failed' ? orphan.code : '', 'UPSTREAM_NOT_FOUND');
    });
  });
}
