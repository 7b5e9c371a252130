import { setImmediate as nextTurn } from 'node:timers/promises';

/** One schema not compiled yet: what it is (method, URL and part) and how to compile it. */
interface Pending {
  what: string;
  compile(): void;
}

/** What a warm-up did. */
export interface WarmUp {
  /** Schemas it compiled (those compiled by a request before it reached them are not counted). */
  compiled: number;
  /** Schemas that would not compile, each with the route and part it belongs to. */
  failed: { what: string; error: Error }[];
  /** Wall time from its start to its end, with the requests served in between. */
  ms: number;
}

/**
 * Compiles a Fastify app's schemas when they are first needed, not while the server starts.
 *
 * Compiling the request validators (Ajv) and the response serialisers (fast-json-stringify) of both APIs
 * takes 300-400 ms of a 1.8 s start-up, before the first request can be answered. Each is compiled
 * by the first request that needs it, or by `warm()`, which the server runs once it listens: one schema a
 * turn of the event loop, so requests arriving meanwhile are served between them. After the warm-up, every
 * request runs compiled code. A HEAD route (Fastify adds one to every GET, with its own copy
 * of the response schema) compiles only if someone sends a HEAD.
 *
 * A schema that does not compile is reported by the warm-up (and by the request that needed it, as any
 * error thrown in a handler) instead of stopping the start; the suite's warm-up test makes that a
 * failing test rather than a surprise.
 */
export class DeferredSchemas {
  readonly #pending = new Set<Pending>();
  #stopped = false;

  /** A getter for what `compile` returns, compiled at its first call (or by the warm-up), then kept. */
  defer<T>(what: string, compile: () => T): () => T {
    let compiled: { value: T } | undefined;
    const pending: Pending = {
      what,
      compile: () => {
        compiled = { value: compile() };
        this.#pending.delete(pending);
      },
    };
    this.#pending.add(pending);
    return () => {
      if (compiled === undefined) pending.compile();
      return (compiled as { value: T }).value;
    };
  }

  /** Schemas not compiled yet. */
  get pending(): number {
    return this.#pending.size;
  }

  /**
   * Compiles every schema not compiled yet, one a turn of the event loop, until none is left or `stop()`
   * is called. Never rejects: a schema that fails is listed in the answer.
   */
  async warm(): Promise<WarmUp> {
    const started = performance.now();
    const failed: WarmUp['failed'] = [];
    let compiled = 0;
    const tried = new Set<Pending>();
    for (const pending of this.#pending) {
      if (this.#stopped) break;
      if (tried.has(pending)) continue;
      tried.add(pending);
      try {
        pending.compile();
        compiled++;
      } catch (error) {
        failed.push({ what: pending.what, error: error instanceof Error ? error : new Error(String(error)) });
      }
      await nextTurn();
    }
    return { compiled, failed, ms: performance.now() - started };
  }

  /** Ends a warm-up at its next turn (the server is closing). */
  stop(): void {
    this.#stopped = true;
  }
}
