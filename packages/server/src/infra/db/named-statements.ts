import type pg from 'pg';

/** Statements kept prepared per connection by default (TENANTRY_DATABASE_STATEMENT_CACHE). */
export const STATEMENT_CACHE_DEFAULT = 256;

type Query = (text: unknown, values?: unknown, callback?: unknown) => unknown;

/**
 * Makes a pooled PostgreSQL connection run each parameterised statement as a named prepared
 * statement (decision 217). Kysely sends every statement as an unnamed one, which PostgreSQL parses,
 * analyses and plans again on every run; named, a statement is parsed once per connection and later
 * runs send only its values. Statements without values (transaction control, DDL) stay unnamed.
 *
 * Each connection keeps at most `max` statements, the least recently used deallocated beyond that
 * (a text with a variable number of values, such as `in ($1, $2, …)`, makes one statement per
 * length). Names are never reused, so a deallocation that fails (in a failed transaction) costs one
 * prepared statement on the server, not a wrong one.
 *
 * A statement whose table changed shape since it was prepared (a rolling upgrade's migration added a
 * column) fails with "cached plan must not change result type" (SQLSTATE 0A000): the connection
 * forgets it, and outside a transaction runs it again, prepared anew. Inside a transaction the
 * error aborted the transaction: it reaches the caller, and `isDatabaseUnavailable` counts it as a
 * moment's unavailability (a request answers 503 with Retry-After; background work looks again).
 */
export function prepareStatements(client: pg.PoolClient, max: number): void {
  if (max <= 0) return;
  const unnamed = client.query.bind(client) as Query;
  // Text → name, least recently used first (a Map keeps insertion order).
  const names = new Map<string, string>();
  let next = 0;
  const forget = (text: string) => {
    const name = names.get(text);
    if (name === undefined) return;
    names.delete(text);
    // Queued behind the statement in flight, before the next one; its own failure changes nothing.
    (unnamed(`deallocate "${name}"`) as Promise<unknown>).catch(() => {});
  };
  const named = (text: string, values: unknown[]) => {
    let name = names.get(text);
    if (name === undefined) {
      name = `tenantry_${next++}`;
      if (names.size >= max) forget(names.keys().next().value as string);
    } else names.delete(text);
    names.set(text, name);
    return unnamed({ name, text, values }) as Promise<pg.QueryResult>;
  };
  const query: Query = (text, values, callback) => {
    if (typeof text !== 'string' || !Array.isArray(values) || values.length === 0 || callback !== undefined)
      return unnamed(text, values, callback);
    const outsideTransaction = client.getTransactionStatus() === 'I';
    return named(text, values).catch((error: unknown) => {
      if (!isChangedShape(error)) throw error;
      forget(text);
      if (!outsideTransaction) throw error;
      return named(text, values);
    });
  };
  (client as unknown as { query: Query }).query = query;
}

/** PostgreSQL's refusal to run a prepared statement whose result's columns changed since it was prepared. */
export function isChangedShape(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === '0A000' && typeof message === 'string' && message.includes('cached plan must not change result type');
}
