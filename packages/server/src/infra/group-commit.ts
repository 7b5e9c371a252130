/** What one item of a batch came to: its value, or the error that is its own answer. */
export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Waiting<I, R> {
  item: I;
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
}

/**
 * Items of a key committed together, as a database commits concurrent transactions together: one batch
 * of a key runs at a time, and the items that arrive meanwhile wait and form the next one, up to
 * `maxBatch`. An item that finds its key idle runs at once, alone, so a quiet key pays no delay and a
 * busy one pays a batch's cost for many items. `run` answers an outcome per item, in order, so an item
 * refused by a check of its own never fails the others; a batch that throws (the database went away)
 * fails each of its items with that error.
 */
export class GroupCommit<I, R> {
  readonly #run: (items: I[]) => Promise<Outcome<R>[]>;
  readonly #maxBatch: number;
  readonly #keys = new Map<string, Waiting<I, R>[]>();

  constructor(run: (items: I[]) => Promise<Outcome<R>[]>, options: { maxBatch: number }) {
    if (!(options.maxBatch >= 1)) throw new Error('GroupCommit needs a batch size of at least 1');
    this.#run = run;
    this.#maxBatch = options.maxBatch;
  }

  submit(key: string, item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const waiting = this.#keys.get(key);
      if (waiting) waiting.push({ item, resolve, reject });
      else {
        this.#keys.set(key, []);
        void this.#drain(key, [{ item, resolve, reject }]);
      }
    });
  }

  /** Items of `key` waiting for the next batch (not those running). */
  waiting(key: string): number {
    return this.#keys.get(key)?.length ?? 0;
  }

  async #drain(key: string, first: Waiting<I, R>[]): Promise<void> {
    let batch = first;
    while (batch.length > 0) {
      try {
        const outcomes = await this.#run(batch.map((waiting) => waiting.item));
        batch.forEach((waiting, i) => {
          const outcome = outcomes[i];
          if (outcome?.ok) waiting.resolve(outcome.value);
          else waiting.reject(outcome ? outcome.error : new Error('a batch answered fewer outcomes than items'));
        });
      } catch (error) {
        for (const waiting of batch) waiting.reject(error);
      }
      const queue = this.#keys.get(key) ?? [];
      batch = queue.splice(0, this.#maxBatch);
    }
    this.#keys.delete(key);
  }
}
