import { sql } from 'kysely';
import type { Logger } from 'pino';
import { startTeardown } from '../customers/lifecycle.ts';
import { type CustomerRow, lockCustomerByUid, removeCustomer, updateCustomer } from '../customers/store.ts';
import type { EventData } from '../events/payloads.ts';
import { recordEvent } from '../events/store.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/database.ts';
import type { OperationType } from '../infra/db/schema.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import { type Platform, type PlatformContext, type Progress, platformScope } from '../platform/platform.ts';
import { toProject } from '../projects/schemas.ts';
import { lockProject, type ProjectRow, removeProject, updateProject } from '../projects/store.ts';
import { modeNowMs } from '../test-mode/mode-clock.ts';
import type { OperationRow } from './store.ts';

/** partner-api.md, States rule 5: provisioning unfinished after 15 minutes fails with PROVISIONING_TIMEOUT. */
export const PROVISIONING_TIMEOUT_MS = 15 * 60 * 1000;
/** After an unexpected error an operation is looked at again this much later. */
const RETRY_AFTER_ERROR_MS = 5_000;
const BATCH = 100;

type Outcome = { state: 'done' } | { state: 'in_progress'; until: Date } | { state: 'failed'; code: string; message: string };

/**
 * One kind of operation. Both calls run in the look's transaction, with the operation's customer
 * already locked (undefined once the customer is gone).
 */
interface Step {
  /** Moves the platform one step on; idempotent, so a repeat after a crash is harmless. */
  step(trx: Db, op: OperationRow, ctx: PlatformContext, customer: CustomerRow | undefined): Promise<Outcome>;
  /** Applies a finished outcome to the resources and records its event. */
  finish(
    trx: Db,
    op: OperationRow,
    ctx: PlatformContext,
    outcome: Exclude<Outcome, { state: 'in_progress' }>,
    customer: CustomerRow | undefined,
  ): Promise<void>;
}

export interface OperationEngineDeps {
  db: Db;
  clock: Clock;
  platform: Platform;
  logger: Logger;
  partnerCache: PartnerCache;
  /** Operations advanced at once per pass. */
  concurrency: number;
}

/**
 * Runs provisioning operations to their end. Each look at an operation is
 * one short transaction that locks the operation row (SKIP LOCKED, so
 * processes sharing a database never work on the same one), asks the
 * platform for the next step, and either schedules the next look (`due_at`)
 * or finishes it: the resource's new state, the operation's outcome and the
 * event commit together. A kill -9 rolls the look back; the next process
 * repeats it, and the outcome and its event are recorded exactly once.
 */
export class OperationEngine {
  readonly #deps: OperationEngineDeps;
  readonly #steps: Record<OperationType, Step>;
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  #pollMs = 250;

  constructor(deps: OperationEngineDeps) {
    this.#deps = deps;
    this.#steps = {
      'customer.create': customerCreate(deps),
      'customer.delete': customerDelete(deps),
      'project.create': projectCreate(deps),
      'project.delete': projectDelete(deps),
    };
  }

  /**
   * Looks at one operation if it is open and due; true when it moved. The background loop skips an
   * operation another process holds (`wait` false); a partner's read waits for it (`wait` true), so
   * what it then reads is current.
   */
  async advance(id: string, wait = false): Promise<boolean> {
    const { db, clock, logger } = this.#deps;
    try {
      // Outside the transaction: what to lock, and the partner's test clock (it only moves forward).
      const target = await db
        .selectFrom('operations')
        .innerJoin('partners', 'partners.id', 'operations.partner_id')
        .select(['operations.partner_id', 'operations.customer_uid', 'operations.type', 'partners.test_clock_offset_ms'])
        .where('operations.id', '=', id)
        .executeTakeFirst();
      if (!target) return false;
      return await db.transaction().execute(async (trx) => {
        // One lock order everywhere (partner, customer, operation, project), so requests and
        // engines never deadlock. The partner is locked only when its customer count changes.
        if (target.type === 'customer.delete') {
          await trx.selectFrom('partners').select('id').where('id', '=', target.partner_id).forUpdate().execute();
        }
        const customer = await lockCustomerByUid(trx, target.customer_uid);
        const op = await trx
          .selectFrom('operations')
          .selectAll()
          .where('id', '=', id)
          .where('status', 'in', ['pending', 'running'])
          .forUpdate()
          .$if(!wait, (q) => q.skipLocked())
          .executeTakeFirst();
        if (!op) return false;
        const now = new Date(modeNowMs(clock, Number(target.test_clock_offset_ms), op.mode));
        if (op.due_at > now) return false;
        const ctx: PlatformContext = {
          db: trx,
          partnerId: op.partner_id,
          mode: op.mode,
          scope: platformScope(op.partner_id, op.mode),
          now,
          operation: { type: op.type, customerId: op.customer_id, project: op.project, createdAt: op.created_at },
        };
        const step = this.#steps[op.type];
        // Only provisioning (creation) times out; a teardown runs until it is done.
        const deadline = op.type.endsWith('.create') ? new Date(op.created_at.getTime() + PROVISIONING_TIMEOUT_MS) : undefined;
        const outcome: Outcome =
          deadline && now >= deadline
            ? { state: 'failed', code: 'PROVISIONING_TIMEOUT', message: 'Provisioning did not finish within 15 minutes.' }
            : await step.step(trx, op, ctx, customer);
        if (outcome.state === 'in_progress') {
          const until = deadline && outcome.until > deadline ? deadline : outcome.until;
          await trx
            .updateTable('operations')
            .set(op.status === 'pending' ? { status: 'running', due_at: until, updated_at: now } : { due_at: until })
            .where('id', '=', op.id)
            .execute();
          return true;
        }
        await step.finish(trx, op, ctx, outcome, customer);
        const failed = outcome.state === 'failed' ? outcome : undefined;
        await trx
          .updateTable('operations')
          .set({
            status: failed ? 'failed' : 'succeeded',
            updated_at: now,
            finished_at: now,
            error_code: failed?.code ?? null,
            error_message: failed?.message ?? null,
          })
          .where('id', '=', op.id)
          .execute();
        logger.info(
          {
            operation_id: op.id,
            type: op.type,
            partner: op.partner_id,
            mode: op.mode,
            status: failed ? 'failed' : 'succeeded',
            error_code: failed?.code,
          },
          'operation finished',
        );
        return true;
      });
    } catch (err) {
      logger.error({ err, operation_id: id }, 'operation step failed; retrying later');
      await db
        .updateTable('operations')
        // Five seconds on the operation's own clock (a test clock may run ahead of the server's).
        .set({
          due_at: sql`${clock.now()}::timestamptz + (${RETRY_AFTER_ERROR_MS} + case when mode = 'test'
            then (select test_clock_offset_ms from partners where partners.id = operations.partner_id) else 0 end) * interval '1 millisecond'`,
        })
        .where('id', '=', id)
        .execute()
        .catch(() => {});
      return false;
    }
  }

  /** Advances the given operations that are open and due (a read of a page of operations does this). */
  async advanceOpen(ops: readonly Pick<OperationRow, 'id' | 'status'>[]): Promise<boolean> {
    let moved = false;
    for (const op of ops) {
      if (op.status === 'pending' || op.status === 'running') moved = (await this.advance(op.id, true)) || moved;
    }
    return moved;
  }

  /**
   * One pass: starts the teardowns whose grace period ended, then advances due operations. Returns how
   * much moved. `wait` makes it wait for rows other work holds instead of skipping them.
   */
  async runDue(wait = false): Promise<number> {
    const { db, clock } = this.#deps;
    const now = clock.now();
    const modeNow = (alias: string) =>
      sql`${now}::timestamptz + (case when ${sql.ref(`${alias}.mode`)} = 'test' then p.test_clock_offset_ms else 0 end) * interval '1 millisecond'`;
    const graceEnded = await sql<{ uid: string }>`
      select c.uid from customers c join partners p on p.id = c.partner_id
      where c.status = 'deletion_scheduled' and c.scheduled_deletion_at <= ${modeNow('c')}
      limit ${BATCH}`.execute(db);
    let moved = 0;
    for (const { uid } of graceEnded.rows) if (await this.#startScheduledTeardown(uid, wait)) moved++;
    const due = await sql<{ id: string }>`
      select o.id from operations o join partners p on p.id = o.partner_id
      where o.status in ('pending', 'running') and o.due_at <= ${modeNow('o')}
      order by o.due_at limit ${BATCH}`.execute(db);
    // Operations of different customers proceed in parallel on a server database; the embedded
    // database has one connection, so there one at a time is as fast as it gets.
    const ids = due.rows.map((row) => row.id);
    const worker = async () => {
      for (let id = ids.shift(); id !== undefined; id = ids.shift()) if (await this.advance(id, wait)) moved++;
    };
    await Promise.all(Array.from({ length: this.#deps.concurrency }, worker));
    return moved;
  }

  /** Runs passes until nothing due is left (the test clock helper answers once everything due has happened). */
  async catchUp(): Promise<void> {
    for (let i = 0; i < 1000 && (await this.runDue(true)) > 0; i++) {}
  }

  /** Starts the background loop: a pass every `pollMs`, and at once after `kick()`. */
  start(pollMs = 250): void {
    this.#pollMs = pollMs;
    this.#stopped = false;
    this.kick();
  }

  /** Asks for a pass as soon as possible (a new operation was opened). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#pass) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#pass = this.#runLoop().finally(() => {
      this.#pass = undefined;
      if (!this.#stopped) this.#timer = setTimeout(() => this.kick(), this.#pollMs);
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#pass;
  }

  async #runLoop(): Promise<void> {
    do {
      this.#again = false;
      try {
        const moved = await this.runDue();
        // A full batch (or a kick during the pass) means more may be waiting.
        if (moved >= BATCH) this.#again = true;
      } catch (err) {
        this.#deps.logger.warn({ err }, 'operation engine pass failed');
        return;
      }
    } while (this.#again && !this.#stopped);
  }

  async #startScheduledTeardown(uid: string, wait: boolean): Promise<boolean> {
    const { db, clock, platform } = this.#deps;
    return db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('customers')
        .selectAll()
        .where('uid', '=', uid)
        .forUpdate()
        .$if(!wait, (q) => q.skipLocked())
        .executeTakeFirst();
      if (row?.status !== 'deletion_scheduled' || !row.scheduled_deletion_at) return false;
      const partner = await trx.selectFrom('partners').select('test_clock_offset_ms').where('id', '=', row.partner_id).executeTakeFirst();
      const now = new Date(modeNowMs(clock, Number(partner?.test_clock_offset_ms ?? 0), row.mode));
      if (row.scheduled_deletion_at > now) return false;
      const ctx = { db: trx, partnerId: row.partner_id, mode: row.mode, scope: platformScope(row.partner_id, row.mode), now };
      await startTeardown(trx, platform, ctx, row, false);
      return true;
    });
  }
}

const fail = (code: string, message: string): Outcome => ({ state: 'failed', code, message });

/** The later of two progress reports, or the first failure. */
function combine(a: Progress, b: Progress): Outcome {
  if (a.state === 'failed') return a;
  if (b.state === 'failed') return b;
  if (a.state === 'in_progress' && b.state === 'in_progress') return { state: 'in_progress', until: a.until > b.until ? a.until : b.until };
  if (a.state === 'in_progress') return a;
  return b;
}

/** A provisioning project turns ready or failed with its operation; its view for the event. */
async function settleProject(trx: Db, project: ProjectRow | undefined, ok: boolean, now: Date) {
  if (!project) return null;
  if (project.state !== 'provisioning') return toProject(project);
  return toProject(await updateProject(trx, project.uid, { state: ok ? 'ready' : 'failed', updated_at: now }));
}

/** Allocates the project's address range (once) and creates it on the platform. */
async function provisionProject(platform: Platform, trx: Db, ctx: PlatformContext, customerUid: string, name: string): Promise<Outcome> {
  const project = await lockProject(trx, customerUid, name);
  if (!project) return fail('PROVISIONING_FAILED', `Project ${name} no longer exists.`);
  let cidr = project.cidr;
  if (!cidr) {
    cidr = (await platform.allocateAddressRange(ctx, project.namespace)) ?? null;
    if (!cidr) return fail('NO_ADDRESS_SPACE', 'No network address range was left for the project.');
    await updateProject(trx, project.uid, { cidr });
  }
  return platform.createProject(ctx, { customerId: project.customer_id, name, namespace: project.namespace, cidr });
}

function customerCreate({ platform, logger }: OperationEngineDeps): Step {
  return {
    async step(trx, op, ctx, customer) {
      if (!customer) return fail('CUSTOMER_DELETED', `Customer ${op.customer_id} no longer exists.`);
      if (customer.status !== 'provisioning')
        return fail('CUSTOMER_DELETING', `Customer ${op.customer_id} was deleted while provisioning.`);
      const org = await platform.createOrganization(ctx, { customerId: customer.id, displayName: customer.display_name });
      if (org.state === 'failed') return org;
      await platform.createUser(ctx, {
        customerId: customer.id,
        username: customer.owner_username,
        email: customer.owner_email,
        role: 'admin',
        firstName: null,
        lastName: null,
      });
      const project = await provisionProject(platform, trx, ctx, customer.uid, op.project ?? 'default');
      return combine(org, project);
    },
    async finish(trx, op, ctx, outcome, customer) {
      const project = customer ? await lockProject(trx, customer.uid, op.project ?? 'default') : undefined;
      const ok = outcome.state === 'done';
      let state: EventData<'customer.ready'>['state'] = customer?.status ?? 'deleted';
      if (customer?.status === 'provisioning') {
        state = ok ? 'active' : 'failed';
        await updateCustomer(trx, customer.uid, { status: ok ? 'active' : 'failed', updated_at: ctx.now });
      }
      const projectView = await settleProject(trx, project, ok, ctx.now);
      await recordEvent(trx, {
        partnerId: op.partner_id,
        mode: op.mode,
        type: ok ? 'customer.ready' : 'customer.failed',
        at: ctx.now,
        data: {
          customer_id: op.customer_id,
          operation_id: op.id,
          project: projectView,
          state,
          error: outcome.state === 'failed' ? { code: outcome.code, message: outcome.message } : null,
        },
      });
      if (!ok) logger.debug({ operation_id: op.id }, 'customer creation failed');
    },
  };
}

function projectCreate({ platform }: OperationEngineDeps): Step {
  return {
    async step(trx, op, ctx, customer) {
      if (!customer) return fail('CUSTOMER_DELETED', `Customer ${op.customer_id} no longer exists.`);
      if (customer.status === 'deleting') return fail('CUSTOMER_DELETING', `Customer ${op.customer_id} is being deleted.`);
      return provisionProject(platform, trx, ctx, customer.uid, op.project ?? '');
    },
    async finish(trx, op, ctx, outcome) {
      const ok = outcome.state === 'done';
      const project = await lockProject(trx, op.customer_uid, op.project ?? '');
      const view = await settleProject(trx, project, ok, ctx.now);
      await recordEvent(trx, {
        partnerId: op.partner_id,
        mode: op.mode,
        type: ok ? 'project.ready' : 'project.failed',
        at: ctx.now,
        data: {
          customer_id: op.customer_id,
          operation_id: op.id,
          project: view,
          state: view?.state ?? 'failed',
          error: outcome.state === 'failed' ? { code: outcome.code, message: outcome.message } : null,
        },
      });
    },
  };
}

function projectDelete({ platform }: OperationEngineDeps): Step {
  return {
    async step(trx, op, ctx) {
      const project = await lockProject(trx, op.customer_uid, op.project ?? '');
      if (!project) return { state: 'done' };
      return platform.deleteProject(ctx, { customerId: op.customer_id, namespace: project.namespace });
    },
    async finish(trx, op, ctx) {
      const project = await lockProject(trx, op.customer_uid, op.project ?? '');
      if (!project) return; // went with its customer, whose customer.deleted reports it
      await removeProject(trx, project.uid);
      await recordEvent(trx, {
        partnerId: op.partner_id,
        mode: op.mode,
        type: 'project.deleted',
        at: ctx.now,
        data: { customer_id: op.customer_id, project: project.name },
      });
    },
  };
}

function customerDelete({ platform, partnerCache }: OperationEngineDeps): Step {
  return {
    async step(_trx, _op, ctx, customer) {
      if (!customer) return { state: 'done' };
      return platform.deleteOrganization(ctx, customer.id);
    },
    async finish(trx, op, ctx, _outcome, customer) {
      if (!customer) return;
      await removeCustomer(trx, customer);
      partnerCache.invalidate(customer.partner_id);
      await recordEvent(trx, {
        partnerId: op.partner_id,
        mode: op.mode,
        type: 'customer.deleted',
        at: ctx.now,
        data: { customer_id: op.customer_id, immediate: customer.deletion_immediate ?? true },
      });
    },
  };
}
