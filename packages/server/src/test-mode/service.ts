import { platformContext, type Tenant } from '../auth/tenant.ts';
import { organizationRef } from '../customers/lifecycle.ts';
import { nextDeletionDueAt } from '../customers/lookup-service.ts';
import type { CustomerService } from '../customers/service.ts';
import type { CustomerTables } from '../customers/tables.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { notFound, validationError } from '../infra/errors/catalogue.ts';
import type { OperationEngine } from '../operations/engine.ts';
import { nextOperationDueAt } from '../operations/service.ts';
import type { OperationTables } from '../operations/tables.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import { advancePartnerTestClock, resetPartnerTestClock, testClockOffsetMs } from '../partners/service.ts';
import type { PartnerTables } from '../partners/tables.ts';
import type { SandboxPlatform } from '../platform/sandbox/sandbox-platform.ts';
import { toUser, type User } from '../users/schemas.ts';
import { setRequiredActionsOf } from '../users/service.ts';
import type { UserTables } from '../users/tables.ts';
import { TEST_CLOCK_MAX_OFFSET_SECONDS } from './mode-clock.ts';
import type { FailureRequest, WorkloadsRequest } from './schemas.ts';

export interface TestHelperServiceDeps {
  db: Db<CustomerTables & OperationTables & PartnerTables & UserTables>;
  clock: Clock;
  sandbox: SandboxPlatform;
  customers: CustomerService;
  engine: OperationEngine;
  partnerCache: PartnerCache;
}

/** CONTRACT §5: the helpers that let a partner's tests drive every failure and timing path. Test mode only. */
export class TestHelperService {
  readonly #deps: TestHelperServiceDeps;

  constructor(deps: TestHelperServiceDeps) {
    this.#deps = deps;
  }

  async injectFailure(tenant: Tenant, request: FailureRequest) {
    const provisioning = request.type === 'gpu_usage' ? undefined : request;
    const failure = {
      type: request.type,
      code: provisioning?.code ?? null,
      message: provisioning?.message ?? null,
      customerId: provisioning?.customer_id ?? null,
      project: provisioning?.project ?? null,
      count: request.count ?? 1,
    };
    await this.#deps.sandbox.injectFailure(platformContext(tenant), failure);
    return {
      type: failure.type,
      code: failure.code,
      message: failure.message,
      customer_id: failure.customerId,
      project: failure.project,
      count: failure.count,
    };
  }

  async setWorkloads(tenant: Tenant, customerId: string, request: WorkloadsRequest) {
    const { sandbox, customers } = this.#deps;
    const customer = await customers.require(tenant, customerId);
    const running = customer.status !== 'suspended' && customer.status !== 'deleting';
    const workloads = await sandbox.setWorkloads(platformContext(tenant), organizationRef(customer), {
      vms: request.vms ?? [],
      databases: request.databases ?? [],
      gpus: request.gpus ?? {},
      running,
    });
    return { customer_id: customerId, ...workloads };
  }

  async setRequiredActions(tenant: Tenant, customerId: string, username: string, actions: string[]): Promise<User> {
    const { db, sandbox, customers } = this.#deps;
    const customer = await customers.require(tenant, customerId);
    const row = await setRequiredActionsOf(db, customer.uid, username, actions);
    if (!row) throw notFound(`User ${username} of customer ${customerId}`);
    // The identity provider's side, after the record (no transaction is open across a platform call).
    await sandbox.setRequiredActions(platformContext(tenant), { ...organizationRef(customer), username }, actions);
    return toUser(row);
  }

  /**
   * Moves the partner's test clock forward and answers once whatever fell due has happened, in time
   * order, as a clock that really passed would: the clock stops at each due time (an operation's
   * next look, a grace period's end) and the engine does what is due then, so a 3-second provisioning
   * step finishes before its 15-minute deadline, and every intermediate event happens with its time.
   */
  async advanceClock(tenant: Tenant, seconds: number): Promise<{ now: string; offset_seconds: number }> {
    const { db, clock, engine, partnerCache } = this.#deps;
    const partner = { id: tenant.partnerId, mode: 'test' as const };
    let offset = await testClockOffsetMs(db, tenant.partnerId);
    const maxOffsetMs = TEST_CLOCK_MAX_OFFSET_SECONDS * 1000;
    const maxSeconds = Math.max(0, Math.floor((maxOffsetMs - offset) / 1000));
    if (seconds > maxSeconds) {
      throw validationError(
        [
          {
            in: 'body',
            field: 'seconds',
            message: `would take the test clock past its limit, ${TEST_CLOCK_MAX_OFFSET_SECONDS / 86_400} days (100 years) ahead of real time: at most ${maxSeconds} now; POST /test-helpers/clock/reset puts it back on real time`,
          },
        ],
        undefined,
        { max_offset_seconds: TEST_CLOCK_MAX_OFFSET_SECONDS, offset_seconds: Math.floor(offset / 1000), max_seconds: maxSeconds },
      );
    }
    const target = offset + seconds * 1000;
    const modeNow = () => new Date(clock.nowMs() + offset);
    const moveTo = async (next: number) => {
      if (next <= offset) return;
      offset = await advancePartnerTestClock(db, tenant.partnerId, next - offset, maxOffsetMs);
      partnerCache.invalidate(tenant.partnerId);
    };
    for (let i = 0; i < 10_000; i++) {
      await engine.drain(partner, modeNow);
      const due = [await nextOperationDueAt(db, partner), await nextDeletionDueAt(db, partner)].filter(
        (at): at is Date => at !== undefined,
      );
      const next = Math.min(...due.map((at) => at.getTime()));
      if (due.length === 0 || next > clock.nowMs() + target) break;
      // Still due now: a look another pass took meanwhile; drain again before the clock moves on.
      if (next - clock.nowMs() <= offset) continue;
      await moveTo(next - clock.nowMs());
    }
    await moveTo(target);
    await engine.drain(partner, modeNow);
    return { now: modeNow().toISOString(), offset_seconds: Math.floor(offset / 1000) };
  }

  /**
   * Puts the partner's test clock back on real time. Test data keeps the times it was recorded with,
   * and work due at a time still ahead (a step, a scheduled deletion) happens when the clock reaches
   * that time again: moving the clock back changes when "now" is, never what happened.
   */
  async resetClock(tenant: Tenant): Promise<{ now: string; offset_seconds: number }> {
    const { db, clock, partnerCache } = this.#deps;
    await resetPartnerTestClock(db, tenant.partnerId);
    partnerCache.invalidate(tenant.partnerId);
    return { now: clock.now().toISOString(), offset_seconds: 0 };
  }
}
