import type { NewEvent } from '../events/payloads.ts';
import type { Db } from '../infra/db/handle.ts';
import type { KeyMode } from '../infra/mode.ts';
import { type FailureCode, failureMessage } from '../platform/failures.ts';
import type { PlatformContext, Progress } from '../platform/platform.ts';
import type { OperationRow } from './store.ts';
import type { OperationTables } from './tables.ts';

/**
 * What provisioning learned from the platform in a look that finished, for the resource's commit to
 * write with its outcome rather than in a statement of its own: a project's address range.
 */
export interface Learned {
  cidr?: string;
}

/** A look that finished, with what it learned. */
export type Done = { state: 'done'; learned?: Learned };

/** What one look at an operation found. */
export type StepOutcome = Progress | Done;
export type FinalOutcome = Done | { state: 'failed'; code: FailureCode; message: string };

/**
 * One kind of operation, as its module implements it. The engine calls `advance` with no
 * transaction open (it may call the platform, which may take seconds); then, for a finished outcome,
 * it opens one short transaction, lets `lock` take the module's locks (in the order partner,
 * customer, project) and `finish` apply the outcome to the resources; the outcome and its event are
 * then written in one statement, only while the operation's lease is still this process's (otherwise
 * the transaction rolls back).
 */
export interface OperationHandler<Locked = unknown, Tables = OperationTables> {
  advance(op: OperationRow, ctx: PlatformContext): Promise<StepOutcome>;
  lock(trx: Db<Tables>, op: OperationRow): Promise<Locked>;
  /** Applies the outcome; answers the outcome to record and the event that announces it. */
  finish(trx: Db<Tables>, op: OperationRow, outcome: FinalOutcome, ctx: PlatformContext, locked: Locked): Promise<Finished>;
  /** After the outcome committed (caches that must not see the state before it). */
  committed?(op: OperationRow, outcome: FinalOutcome): void;
}

/**
 * What a handler's `finish` answers: the outcome to record (a success the resource no longer allows
 * becomes a failure), and the event announcing it, if any, written with the outcome in one statement.
 */
export interface Finished {
  outcome: FinalOutcome;
  event?: NewEvent;
}

/** Background work the engine's pass runs besides operations (a grace period ending, a user left half-made). */
export type Sweep = (scope: { partner?: { id: string; mode: KeyMode } }) => Promise<number>;

/** The step outcome of a sequence of platform calls: the first that is not done, or done. */
export async function inOrder(...steps: (() => Promise<Progress>)[]): Promise<Progress> {
  for (const step of steps) {
    const progress = await step();
    if (progress.state !== 'done') return progress;
  }
  return { state: 'done' };
}

export const fail = (code: FailureCode, message = failureMessage(code)): FinalOutcome => ({ state: 'failed', code, message });
