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
  const prepared = new PreparedTexts<string>(max);
  const deallocate = (name: string | undefined) => {
    // Queued behind the statement in flight, before the next one; its own failure changes nothing.
    if (name !== undefined) (unnamed(`deallocate "${name}"`) as Promise<unknown>).catch(() => {});
  };
  const named = (text: string, values: unknown[]) => {
    let name = prepared.use(text);
    if (name === undefined) {
      name = prepared.newName();
      deallocate(prepared.add(text, name));
    }
    return unnamed({ name, text, values }) as Promise<pg.QueryResult>;
  };
  const query: Query = (text, values, callback) => {
    if (typeof text !== 'string' || !Array.isArray(values) || values.length === 0 || callback !== undefined)
      return unnamed(text, values, callback);
    const outsideTransaction = client.getTransactionStatus() === 'I';
    return named(text, values).catch((error: unknown) => {
      if (!isChangedShape(error)) throw error;
      deallocate(prepared.remove(text));
      if (!outsideTransaction) throw error;
      return named(text, values);
    });
  };
  (client as unknown as { query: Query }).query = query;
}

/**
 * The texts a connection has prepared and what each was prepared as, least recently used first, at
 * most `max` of them; names are never reused. Both drivers keep theirs in one (this file, and
 * `pglite-pool.ts` for the embedded database).
 */
export class PreparedTexts<V> {
  readonly #max: number;
  // Insertion order is recency order: a use moves the text to the end.
  readonly #byText = new Map<string, V>();
  #next = 0;

  constructor(max: number) {
    this.#max = max;
  }

  newName(): string {
    return `tenantry_${this.#next++}`;
  }

  /** What `text` was prepared as, now the most recently used; undefined if it is not prepared. */
  use(text: string): V | undefined {
    const value = this.#byText.get(text);
    if (value === undefined) return undefined;
    this.#byText.delete(text);
    this.#byText.set(text, value);
    return value;
  }

  /** Records a text just prepared; answers what the least recently used one beyond `max` was, now forgotten (to close it). */
  add(text: string, value: V): V | undefined {
    let evicted: V | undefined;
    if (this.#byText.size >= this.#max) {
      const oldest = this.#byText.keys().next().value;
      if (oldest !== undefined) evicted = this.remove(oldest);
    }
    this.#byText.set(text, value);
    return evicted;
  }

  /** Forgets `text`; answers what it was prepared as (to close it). */
  remove(text: string): V | undefined {
    const value = this.#byText.get(text);
    this.#byText.delete(text);
    return value;
  }
}

/** PostgreSQL's refusal to run a prepared statement whose result's columns changed since it was prepared. */
export function isChangedShape(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === '0A000' && typeof message === 'string' && message.includes('cached plan must not change result type');
}
