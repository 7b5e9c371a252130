import { AsyncLocalStorage } from 'node:async_hooks';
import type { Kysely, Transaction, TransactionBuilder } from 'kysely';

/**
 * Knows whether the code running now is inside a database transaction: a transaction's callback,
 * and everything it awaits, runs in an async context marked here. The platform guard asks it, so a
 * platform call made while a transaction (and its row locks, and on the embedded database the one
 * connection) is held fails at once instead of stalling everyone behind a slow network call.
 */
const inside = new AsyncLocalStorage<{ afterCommit: (() => void)[] }>();

export function inTransaction(): boolean {
  return inside.getStore() !== undefined;
}

/** A network call made while the caller holds a database transaction: a bug, refused loudly. */
export class NetworkCallInTransactionError extends Error {
  override name = 'NetworkCallInTransactionError';

  constructor(what: string) {
    super(`${what} was called with a database transaction open: make network calls before or after the transaction`);
  }
}

/**
 * Every outbound client (webhook receivers, DNS, Kubernetes, the identity provider, Prometheus) calls this
 * at its entry: a network call may take seconds, and inside a transaction it would hold row locks and a
 * pool connection (the embedded database's only one) for that long. Throws NetworkCallInTransactionError.
 */
export function refuseInTransaction(what: string): void {
  if (inTransaction()) throw new NetworkCallInTransactionError(what);
}

/**
 * Runs `callback` once the transaction running now has committed (not at all if it rolls back), or
 * soon if none is running. For telling others about rows they can only see after the commit, such
 * as waking a background loop; a callback's error is not the transaction's, and it is the callback's
 * to handle.
 */
export function afterCommit(callback: () => void): void {
  const transaction = inside.getStore();
  if (!transaction) queueMicrotask(callback);
  // The same callback asked for twice (several events in one transaction) runs once.
  else if (!transaction.afterCommit.includes(callback)) transaction.afterCommit.push(callback);
}

/** Marks every transaction of `db` (and of the builders it hands out). Returns `db`. */
export function trackTransactions<DB>(db: Kysely<DB>): Kysely<DB> {
  const begin = db.transaction.bind(db);
  db.transaction = () => marked(begin());
  return db;
}

function marked<DB>(builder: TransactionBuilder<DB>): TransactionBuilder<DB> {
  return new Proxy(builder, {
    get(target, property, receiver) {
      if (property === 'execute') {
        return function execute<T>(callback: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
          const transaction = { afterCommit: [] as (() => void)[] };
          return target
            .execute((trx) => inside.run(transaction, () => callback(trx)))
            .then((result) => {
              for (const committed of transaction.afterCommit) committed();
              return result;
            });
        };
      }
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      // setIsolationLevel() and friends answer a new builder: mark that one too.
      return (...args: unknown[]) => {
        const result = value.apply(target, args);
        return result === target || !(result && typeof result === 'object' && 'execute' in result) ? result : marked(result);
      };
    },
  });
}
