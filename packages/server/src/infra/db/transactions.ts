import { AsyncLocalStorage } from 'node:async_hooks';
import type { Kysely, Transaction, TransactionBuilder } from 'kysely';

/**
 * Knows whether the code running now is inside a database transaction: a transaction's callback,
 * and everything it awaits, runs in an async context marked here. The platform guard asks it, so a
 * platform call made while a transaction (and its row locks, and on the embedded database the one
 * connection) is held fails at once instead of stalling everyone behind a slow network call.
 */
const inside = new AsyncLocalStorage<true>();

export function inTransaction(): boolean {
  return inside.getStore() === true;
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
          return target.execute((trx) => inside.run(true, () => callback(trx)));
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
