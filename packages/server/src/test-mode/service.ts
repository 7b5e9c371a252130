import { sql } from 'kysely';
import type { CustomerService } from '../customers/service.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/database.ts';
import { type FieldProblem, notFound, validationError } from '../infra/errors/catalogue.ts';
import type { OperationEngine } from '../operations/engine.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import type { SandboxPlatform } from '../platform/sandbox/sandbox-platform.ts';
import { platformContext, type Tenant } from '../platform/tenant.ts';
import { toUser, type User } from '../users/schemas.ts';
import { setUserRequiredActions } from '../users/store.ts';
import { modeNowMs } from './mode-clock.ts';
import type { FailureRequest, WorkloadsRequest } from './schemas.ts';

export interface TestHelperServiceDeps {
  db: Db;
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
    const problems: FieldProblem[] = [];
    if (request.type === 'gpu_usage') {
      for (const field of ['code', 'message', 'customer_id', 'project'] as const) {
        if (request[field] !== undefined) problems.push({ in: 'body', field, message: 'does not apply to type gpu_usage' });
      }
    } else if (request.code === undefined) {
      problems.push({ in: 'body', field: 'code', message: `is required for type ${request.type}` });
    }
    if (problems.length > 0) throw validationError(problems);
    const failure = {
      type: request.type,
      code: request.code ?? null,
      message: request.message ?? null,
      customerId: request.customer_id ?? null,
      project: request.project ?? null,
      count: request.count ?? 1,
    };
    await this.#deps.sandbox.injectFailure(platformContext(this.#deps.db, tenant), failure);
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
    const { db, sandbox, customers } = this.#deps;
    const customer = await customers.require(tenant, customerId);
    const running = customer.status !== 'suspended' && customer.status !== 'deleting';
    const workloads = await sandbox.setWorkloads(platformContext(db, tenant), customerId, {
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
    return db.transaction().execute(async (trx) => {
      const row = await setUserRequiredActions(trx, customer.uid, username, actions);
      if (!row) throw notFound(`User ${username} of customer ${customerId}`);
      await sandbox.setRequiredActions(platformContext(trx, tenant), { customerId, username }, actions);
      return toUser(row);
    });
  }

  /** Moves the partner's test clock forward and answers once whatever fell due has happened. */
  async advanceClock(tenant: Tenant, seconds: number): Promise<{ now: string; offset_seconds: number }> {
    const { db, clock, engine, partnerCache } = this.#deps;
    const row = await db
      .updateTable('partners')
      .set({ test_clock_offset_ms: sql`test_clock_offset_ms + ${seconds * 1000}` })
      .where('id', '=', tenant.partnerId)
      .returning('test_clock_offset_ms')
      .executeTakeFirstOrThrow();
    partnerCache.invalidate(tenant.partnerId);
    await engine.catchUp();
    const offset = Number(row.test_clock_offset_ms);
    return { now: new Date(modeNowMs(clock, offset, 'test')).toISOString(), offset_seconds: Math.floor(offset / 1000) };
  }
}
