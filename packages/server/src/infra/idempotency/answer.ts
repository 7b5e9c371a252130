import { AsyncLocalStorage } from 'node:async_hooks';
import type { Db } from '../db/handle.ts';
import { afterCommit, inTransaction } from '../db/transactions.ts';
import { type CompletedKey, completeKey, completeKeys, deleteExpiredKeys, type IdempotencyScope } from './store.ts';
import type { IdempotencyTables } from './tables.ts';

/**
 * The success answer of the idempotent request running now, ready to be written by the transaction
 * that makes its effect. A request cut by a crash between that commit and the response would otherwise
 * leave its key running with no answer: the retry, once the key's lease ran out, would run again and
 * answer what the first request's own effect now causes (ALREADY_EXISTS for the customer it created).
 */
export interface PendingAnswer {
  readonly scope: IdempotencyScope;
  readonly requestId: string;
  /** The route's success status and body for `data`: the body as sent, and as kept at rest. */
  render(data: unknown): { statusCode: number; sent: string; stored: string };
  /** Set once the transaction that wrote the answer committed: the body it answers with. */
  committed?: string;
}

const running = new AsyncLocalStorage<PendingAnswer>();

/** Runs a route's handler with its request's pending answer in reach of the commands it calls. */
export function withPendingAnswer<T>(answer: PendingAnswer, handler: () => T): T {
  return running.run(answer, handler);
}

/**
 * The pending answer of the request running now, for a command that commits it later in a transaction
 * it shares with other requests' effects (`answersFor`); undefined outside an idempotent request.
 */
export function currentAnswer(): PendingAnswer | undefined {
  return running.getStore();
}

/**
 * Writes each request's answer in `trx`, the one transaction that commits all their effects (a batch
 * of creates): as `answerWith` does for one request, with each request's answer given explicitly.
 */
export async function answersFor(
  trx: Db<IdempotencyTables>,
  answers: ReadonlyArray<{ answer: PendingAnswer | undefined; data: unknown }>,
): Promise<void> {
  if (!inTransaction()) throw new Error('answersFor writes the answers in the transaction of the effects they answer for');
  const written: { answer: PendingAnswer; sent: string }[] = [];
  const keys: CompletedKey[] = [];
  for (const { answer, data } of answers) {
    if (!answer) continue;
    const { statusCode, sent, stored } = answer.render(data);
    keys.push({ scope: answer.scope, requestId: answer.requestId, statusCode, body: stored });
    written.push({ answer, sent });
  }
  if (keys.length === 0) return;
  await completeKeys(trx, keys);
  afterCommit(() => {
    for (const { answer, sent } of written) answer.committed = sent;
  });
}

/**
 * Writes `data`, as the running request's route answers it, as the request's idempotent answer, in
 * `trx`: the transaction of the command whose effect the answer reports. A command calls it last in
 * that transaction, with what it returns; outside an idempotent request it does nothing. Answers `data`.
 */
export async function answerWith<T>(trx: Db<IdempotencyTables>, data: T): Promise<T> {
  const answer = running.getStore();
  if (answer === undefined) return data;
  if (!inTransaction()) throw new Error('answerWith writes the answer in the transaction of the effect it answers for');
  const { statusCode, sent, stored } = answer.render(data);
  await completeKey(trx, answer.scope, answer.requestId, statusCode, stored);
  afterCommit(() => {
    answer.committed = sent;
  });
  return data;
}

/**
 * Forgets the keys and answers past their 24 hours (partner-api.md): a retry after that runs again.
 * The server's maintenance calls it; answers how many it forgot.
 */
export function forgetExpiredAnswers(db: Db<IdempotencyTables>, now: Date): Promise<number> {
  return deleteExpiredKeys(db, now);
}
