import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { NewEvent } from '../events/payloads.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import type { StepResult } from '../infra/metrics/metrics.ts';
import type { KeyMode } from '../infra/mode.ts';
import { Poller } from '../infra/poller.ts';
import { type SpanHandle, tracing } from '../infra/telemetry/tracing.ts';
import { failureMessage } from '../platform/failures.ts';
import { type PlatformContext, PlatformUnavailableError } from '../platform/platform.ts';
import {
  claimDueOperations,
  type DueOperation,
  finishOperation,
  hasLeasedDueOperations,
  releaseAllLeases,
  releaseLeases,
  renewLeases,
  scheduleNextLook,
} from './claims.ts';
import type { FinalOutcome, OperationHandler, StepOutcome, Sweep } from './handler.ts';
import type { OperationTables, OperationType } from './tables.ts';

/** partner-api.md, States rule 5: provisioning unfinished after 15 minutes fails with PROVISIONING_TIMEOUT. */
export const PROVISIONING_TIMEOUT_MS = 15 * 60 * 1000;
/**
 * How long a claimed operation stays this process's without a sign of life. A look in progress
 * renews it every `LEASE_MS / 4`, so a live process keeps an operation however long its platform
 * call takes, and a killed one (kill -9, a lost machine) gives it up within this time.
 */
export const LEASE_MS = 20_000;
/** A platform call of one look is given this long (its AbortSignal fires then). */
const LOOK_TIMEOUT_MS = 45_000;
const BATCH = 100;
/**
 * The background loop runs the sweeps at most this often (a grace period's end, a quota to apply again,
 * a user left half-done: all on the scale of seconds or more), while it claims due operations on every
 * pass. A pass asked for by a partner's test clock, or called directly, always sweeps.
 */
const SWEEP_EVERY_MS = 1_000;
/** Backoff after a look that could not move (platform unavailable, an unexpected error): 1 s doubling to 5 minutes. */
const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 5 * 60_000;
/** A look that could not move is logged the first time and then at these counts, not at every retry. */
const LOG_AT = new Set([1, 5, 20, 100]);

export interface OperationEngineDeps<Tables extends OperationTables = OperationTables> {
  db: Db<Tables>;
  clock: Clock;
  logger: Logger;
  /**
   * The background loop's workers, the operations it looks at at once (TENANTRY_ENGINE_CONCURRENCY:
   * 8 on a PostgreSQL server, 1 on the embedded database's one connection). 0: this process runs no
   * background loop (an API-only process; another sharing the database runs the operations); a pass
   * asked for explicitly (the test clock's) still looks at one at a time.
   */
  concurrency: number;
  /**
   * Only this process opens the database (the embedded one, whose lock file keeps a second process
   * out): at start, leases a killed predecessor left are given back at once instead of running out.
   */
  exclusive?: boolean;
  /** The lease (default `LEASE_MS`; tests shorten it). */
  leaseMs?: number;
  /** Records the event a finished operation announces, in its finishing transaction (the events module's `record`). */
  recordEvent: (trx: Db<OperationTables>, event: NewEvent) => Promise<unknown>;
  /** Counts each look by its outcome (the process's metrics). */
  metrics?: { operationStep(type: string, result: StepResult): void };
}

/**
 * Runs operations to their end: a generic runner of the steps modules register. The background loop
 * claims due operations with a lease (one statement for up to a batch; processes sharing a database
 * never work on one operation at once) into a queue its workers take from: each worker looks at one
 * operation with no transaction open, commits its outcome in one short transaction guarded by the
 * lease, and takes the next. The loop claims again whenever a worker is free, so a slow look holds one worker, never
 * the others. A look repeated after a crash or a lost lease is harmless: every
 * platform call is idempotent, and an outcome commits only under its lease, which is its claim's own
 *. A partner's read never does this work; it only wakes the engine.
 */
export class OperationEngine<Tables extends OperationTables = OperationTables> {
  readonly #deps: OperationEngineDeps<Tables>;
  /** The handle for the engine's own statements, on its own tables. */
  readonly #db: Db<OperationTables>;
  readonly #handlers = new Map<OperationType, OperationHandler<unknown, Tables>>();
  readonly #sweeps: Sweep[] = [];
  /** This process's name in the leases it takes: each claim's lease is this name and the claim's number. */
  readonly #owner = `engine-${randomBytes(6).toString('hex')}`;
  #claims = 0;
  readonly #poller: Poller;
  /** When the background loop last swept (monotonic, not the injectable clock: this paces CPU, not rules). */
  #sweptAt = Number.NEGATIVE_INFINITY;
  /** Operations the background loop claimed that no worker has taken yet, oldest due first. */
  readonly #queue: DueOperation[] = [];
  /** The looks the background loop's workers are running. */
  readonly #looks = new Set<Promise<void>>();
  /** Every claim the background loop holds (queued or being looked at): their leases are renewed. */
  readonly #held = new Set<DueOperation>();
  #renewal: NodeJS.Timeout | undefined;
  /**
   * A pass was asked for while no worker was free (a kick, a wake, a full claim): the next worker to
   * come free asks for one. Otherwise a finished look asks for none, and an idle engine runs no claim.
   */
  #missed = false;
  /** The background loop's workers (an explicit pass with none configured still looks at one at a time). */
  readonly #workers: number;

  constructor(deps: OperationEngineDeps<Tables>) {
    this.#deps = deps;
    this.#db = ownTables(deps.db);
    this.#workers = Math.max(deps.concurrency, 1);
    this.#poller = new Poller('operation engine', () => this.#claimPass(), deps.logger);
  }

  register<Locked>(type: OperationType, handler: OperationHandler<Locked, Tables>): void {
    this.#handlers.set(type, handler as OperationHandler<unknown, Tables>);
  }

  addSweep(sweep: Sweep): void {
    this.#sweeps.push(sweep);
  }

  async start(pollMs = 1_000): Promise<void> {
    if (this.#deps.concurrency === 0) {
      this.#deps.logger.info('operation engine off in this process (TENANTRY_ENGINE_CONCURRENCY=0): another process runs operations');
      return;
    }
    if (this.#deps.exclusive) {
      const released = await releaseAllLeases(this.#db);
      if (released > 0) this.#deps.logger.info({ released }, 'gave back operation leases a previous process left');
    }
    this.#renewal = this.#renewing(this.#held);
    this.#poller.start(pollMs);
  }

  /**
   * Asks for a pass as soon as possible (an operation was opened, or a partner is waiting on one).
   * While every worker is busy there is nothing to ask: the next look to end asks.
   */
  kick(): void {
    if (this.#workerFree()) this.#poller.kick();
    else this.#missed = true;
  }

  /** Whether a worker would find nothing to take: none queued for it, and fewer looks than workers. */
  #workerFree(): boolean {
    return this.#queue.length + this.#looks.size < this.#workers;
  }

  /**
   * Stops claiming, lets the looks in progress finish and gives back the leases of the operations
   * claimed but not yet looked at (another process, or this one's next start, takes them up).
   */
  async stop(): Promise<void> {
    await this.#poller.stop();
    const queued = this.#queue.splice(0);
    for (const op of queued) this.#held.delete(op);
    while (this.#looks.size > 0) await Promise.all(this.#looks);
    clearInterval(this.#renewal);
    if (queued.length > 0)
      await releaseLeases(this.#db, queued).catch((err: unknown) =>
        this.#deps.logger.warn({ err }, 'giving back operation leases failed; they run out instead'),
      );
  }

  /** The background loop's pass: the sweeps (at most every second), then a claim if a worker is free. */
  async #claimPass(): Promise<boolean> {
    if (performance.now() - this.#sweptAt >= SWEEP_EVERY_MS) {
      this.#sweptAt = performance.now();
      for (const sweep of this.#sweeps) await sweep({});
    }
    const limit = BATCH - this.#held.size;
    // Only for a free worker: claims made while every worker is busy would each take a few
    // operations (a burst's creates arrive one by one), where waiting takes them in one statement.
    if (!this.#workerFree() || limit <= 0) {
      this.#missed = true;
      return false;
    }
    const { clock, leaseMs = LEASE_MS } = this.#deps;
    const now = clock.now();
    const claimed = await claimDueOperations(this.#db, { lease: this.#lease(), now, leaseUntil: new Date(now.getTime() + leaseMs), limit });
    for (const op of claimed) {
      this.#held.add(op);
      this.#queue.push(op);
    }
    this.#startLooks();
    if (claimed.length === limit) this.#missed = true;
    return false;
  }

  /** Gives each free worker the next queued operation; a worker that finishes takes another, or asks for the pass it missed. */
  #startLooks(): void {
    while (this.#looks.size < this.#workers) {
      const op = this.#queue.shift();
      if (op === undefined) return;
      const look: Promise<void> = this.#look(op)
        .catch((err: unknown) => this.#deps.logger.error({ err, operation_id: op.id }, 'looking at an operation failed'))
        .finally(() => {
          this.#looks.delete(look);
          this.#held.delete(op);
          this.#startLooks();
          if (this.#missed && this.#workerFree()) {
            this.#missed = false;
            this.#poller.kick();
          }
        });
      this.#looks.add(look);
    }
  }

  /**
   * One pass asked for explicitly (the test clock's catch-up, tests): the sweeps (unless told not to),
   * then the due operations, each looked at before it answers. Returns how many operations it looked at.
   */
  async runDue(partner?: { id: string; mode: KeyMode }, options: { sweep?: boolean } = {}): Promise<number> {
    const { clock, leaseMs = LEASE_MS } = this.#deps;
    if (options.sweep !== false) for (const sweep of this.#sweeps) await sweep(partner ? { partner } : {});
    const now = clock.now();
    const claimed = await claimDueOperations(this.#db, {
      lease: this.#lease(),
      now,
      leaseUntil: new Date(now.getTime() + leaseMs),
      limit: BATCH,
      ...(partner ? { partner } : {}),
    });
    const queue = [...claimed];
    const held = new Set(claimed);
    const worker = async () => {
      for (let op = queue.shift(); op !== undefined; op = queue.shift()) {
        await this.#look(op);
        held.delete(op);
      }
    };
    const renewal = this.#renewing(held);
    try {
      await Promise.all(Array.from({ length: Math.min(this.#workers, queue.length) }, worker));
    } finally {
      clearInterval(renewal);
    }
    return claimed.length;
  }

  /** A new claim's lease: unique to it, so that only the latest claim of an operation can record its outcome. */
  #lease(): string {
    return `${this.#owner}.${++this.#claims}`;
  }

  /**
   * Renews the leases of `held` (the operations claimed and not yet finished) every quarter of a lease
   * while they are held: a slow platform call must not let another process take an operation over.
   */
  #renewing(held: Set<DueOperation>): NodeJS.Timeout {
    const { clock, leaseMs = LEASE_MS } = this.#deps;
    return setInterval(() => {
      if (held.size === 0) return;
      renewLeases(this.#db, [...held], new Date(clock.nowMs() + leaseMs)).catch((err: unknown) =>
        this.#deps.logger.warn({ err }, 'renewing operation leases failed'),
      );
    }, leaseMs / 4);
  }

  /**
   * Runs everything due for one partner's mode until nothing due is left, waiting for operations
   * another pass holds (the test clock answers once whatever fell due has happened).
   */
  async drain(partner: { id: string; mode: KeyMode }, modeNow: () => Date): Promise<void> {
    const { clock } = this.#deps;
    for (let i = 0; i < 10_000; i++) {
      if ((await this.runDue(partner)) > 0) continue;
      if (!(await hasLeasedDueOperations(this.#db, partner, modeNow(), clock.now()))) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** A look, in a span of its own linked to the request that opened the operation (when traces are on). */
  #look(op: DueOperation): Promise<void> {
    const traces = tracing();
    if (!traces.enabled) return this.#lookAt(op, undefined);
    const attributes = { 'tenantry.operation.id': op.id, 'tenantry.operation.type': op.type, 'tenantry.partner_id': op.partner_id };
    return traces.linked(`operation ${op.type}`, op.trace_parent, attributes, (span) => this.#lookAt(op, span));
  }

  async #lookAt(op: DueOperation, span: SpanHandle | undefined): Promise<void> {
    const { clock, logger } = this.#deps;
    const handler = this.#handlers.get(op.type);
    const now = new Date(op.mode === 'test' ? clock.nowMs() + op.test_clock_offset_ms : clock.nowMs());
    const ctx: PlatformContext = {
      partnerId: op.partner_id,
      mode: op.mode,
      now,
      operation: { id: op.id, type: op.type, customerId: op.customer_id, project: op.project, createdAt: op.created_at },
      signal: AbortSignal.timeout(LOOK_TIMEOUT_MS),
    };
    // Only provisioning (creation) times out; a teardown runs until it is done.
    const deadline = op.type.endsWith('.create') ? new Date(op.created_at.getTime() + PROVISIONING_TIMEOUT_MS) : undefined;
    let outcome: StepOutcome;
    try {
      if (!handler) throw new Error(`no handler registered for ${op.type}`);
      outcome = await handler.advance(op, ctx);
    } catch (err) {
      if (err instanceof PlatformUnavailableError) {
        outcome = { state: 'unavailable', reason: err.message, retryAfterMs: err.retryAfterS * 1000 };
      } else {
        if (isFirstOrMilestone(op))
          logger.error({ err, operation_id: op.id, type: op.type, looks: op.failed_looks + 1 }, 'operation step failed');
        outcome = { state: 'unavailable', reason: `unexpected error: ${(err as Error).message}` };
      }
    }
    // A teardown cannot fail (the resource is going away whatever happens): the platform refusing a
    // step is retried with backoff, and the operator sees it among the stuck operations.
    if (!deadline && outcome.state === 'failed') outcome = { state: 'unavailable', reason: `${outcome.code}: ${outcome.message}` };
    if (deadline && now >= deadline && outcome.state !== 'done' && outcome.state !== 'failed') {
      outcome = { state: 'failed', code: 'PROVISIONING_TIMEOUT', message: failureMessage('PROVISIONING_TIMEOUT') };
    }
    this.#deps.metrics?.operationStep(op.type, outcome.state);
    span?.set({ 'tenantry.operation.result': outcome.state, 'tenantry.operation.error': 'code' in outcome ? outcome.code : undefined });
    try {
      if (outcome.state === 'in_progress') {
        const until = deadline && outcome.until > deadline ? deadline : outcome.until;
        await scheduleNextLook(this.#db, op, { dueAt: until, now });
        this.#poller.wakeIn(until.getTime() - now.getTime());
      } else if (outcome.state === 'unavailable') {
        if (isFirstOrMilestone(op))
          logger.warn(
            { operation_id: op.id, type: op.type, looks: op.failed_looks + 1, reason: outcome.reason },
            'platform not answering; will look again',
          );
        const backoff = outcome.retryAfterMs ?? Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(op.failed_looks, 20));
        const backoffUntil = new Date(now.getTime() + backoff);
        const dueAt = deadline && backoffUntil > deadline ? deadline : backoffUntil;
        await scheduleNextLook(this.#db, op, { dueAt, now, problem: outcome.reason });
        this.#poller.wakeIn(dueAt.getTime() - now.getTime());
      } else {
        await this.#finish(op, handler as OperationHandler<unknown, Tables>, outcome, ctx);
      }
    } catch (err) {
      // The outcome could not be recorded (a deadlock, a lost connection): give the lease back so the
      // next look comes soon; if even that fails, the lease runs out and another process looks.
      logger.warn({ err, operation_id: op.id }, 'recording an operation outcome failed; it will be looked at again');
      const retry = new Date(now.getTime() + BACKOFF_BASE_MS);
      await scheduleNextLook(this.#db, op, {
        dueAt: retry,
        now,
        problem: `recording failed: ${(err as Error).message}`,
      }).catch(() => {});
    }
  }

  async #finish(op: DueOperation, handler: OperationHandler<unknown, Tables>, outcome: FinalOutcome, ctx: PlatformContext): Promise<void> {
    const { logger } = this.#deps;
    const recorded = await this.#finishLocked(op, handler, outcome, ctx);
    if (!recorded) return;
    handler.committed?.(op, recorded);
    logger.info(
      {
        operation_id: op.id,
        type: op.type,
        partner: op.partner_id,
        mode: op.mode,
        status: recorded.state === 'done' ? 'succeeded' : 'failed',
        error_code: recorded.state === 'failed' ? recorded.code : undefined,
      },
      'operation finished',
    );
  }

  /** `lock` and `finish` in one short transaction, the outcome written under the lease: the recorded outcome, or undefined when the lease was lost. */
  async #finishLocked(op: DueOperation, handler: OperationHandler<unknown, Tables>, outcome: FinalOutcome, ctx: PlatformContext) {
    return this.#deps.db
      .transaction()
      .execute(async (trx) => {
        const locked = await handler.lock(trx, op);
        const { outcome: final, event } = await handler.finish(trx, op, outcome, ctx, locked);
        // Written only while this look's claim still holds the lease: if another
        // claim took the operation over (ours ran out, or a deletion took the lease back and a process,
        // this one or another, claimed it again), that look decides, and everything this transaction
        // wrote goes back with the error.
        if (!(await finishOperation(ownTables(trx), op, final, ctx.now))) throw new LeaseLost();
        if (event) await this.#deps.recordEvent(ownTables(trx), event);
        return final;
      })
      .catch((error: unknown) => {
        if (error instanceof LeaseLost) return undefined;
        throw error;
      });
  }
}

/** The operation's lease was no longer this look's claim's when its outcome was to be written. */
class LeaseLost extends Error {}

const isFirstOrMilestone = (op: { failed_looks: number }) => LOG_AT.has(op.failed_looks + 1) || (op.failed_looks + 1) % 500 === 0;

/** A handle on the handlers' tables as one on the operations' own: TypeScript does not relate a type parameter's handle to its constraint's. */
function ownTables<Tables extends OperationTables>(db: Db<Tables>): Db<OperationTables> {
  return db as unknown as Db<OperationTables>;
}
