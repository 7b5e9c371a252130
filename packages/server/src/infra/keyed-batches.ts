/**
 * Work that runs in batches per key, as a database commits concurrent transactions together (group
 * commit): at most `concurrency` batches of a key run at once, and items that arrive while they run
 * wait and go together in the next one, up to `maxBatch`. An item that finds a free slot runs at once,
 * alone, so a quiet key pays no delay; a busy key pays one batch's cost for many items.
 *
 * A batch is all or nothing: `run` answers one result per item, in order, or throws. When a batch of
 * several throws, each of its items runs again alone, ahead of any that arrived since, so each gets its
 * own answer (its own error, if it has one); an item that fails alone rejects with its error. `run` is
 * therefore free to refuse a batch whenever one of its items would need looking at on its own.
 */
export class KeyedBatches<Item, Result> {
  readonly #run: (items: Item[]) => Promise<Result[]>;
  readonly #concurrency: number;
  readonly #maxBatch: number;
  readonly #keys = new Map<string, KeyState<Item, Result>>();

  constructor(run: (items: Item[]) => Promise<Result[]>, options: { concurrency: number; maxBatch: number }) {
    if (!(options.concurrency >= 1 && options.maxBatch >= 1))
      throw new Error('KeyedBatches needs a concurrency and a batch size of at least 1');
    this.#run = run;
    this.#concurrency = options.concurrency;
    this.#maxBatch = options.maxBatch;
  }

  /** Runs `item` in the next batch of `key`; answers its result. */
  submit(key: string, item: Item): Promise<Result> {
    let state = this.#keys.get(key);
    if (!state) {
      state = { running: 0, waiting: [] };
      this.#keys.set(key, state);
    }
    const waiting = state.waiting;
    const answer = new Promise<Result>((resolve, reject) => {
      waiting.push({ item, alone: false, resolve, reject });
    });
    this.#pump(key, state);
    return answer;
  }

  /** How many items of `key` wait for a batch (not those running). */
  waiting(key: string): number {
    return this.#keys.get(key)?.waiting.length ?? 0;
  }

  #pump(key: string, state: KeyState<Item, Result>): void {
    while (state.running < this.#concurrency && state.waiting.length > 0) {
      // An item sent back from a failed batch runs alone; the others go together.
      const first = state.waiting[0] as Waiting<Item, Result>;
      const batch = first.alone ? state.waiting.splice(0, 1) : state.waiting.splice(0, this.#togetherAtHead(state.waiting));
      state.running++;
      void this.#runBatch(state, batch).finally(() => {
        state.running--;
        if (state.running === 0 && state.waiting.length === 0) this.#keys.delete(key);
        else this.#pump(key, state);
      });
    }
  }

  /** How many of the first waiting items may go together: up to `maxBatch`, stopping at one that must run alone. */
  #togetherAtHead(waiting: Waiting<Item, Result>[]): number {
    let count = 0;
    while (count < waiting.length && count < this.#maxBatch && !(waiting[count] as Waiting<Item, Result>).alone) count++;
    return count;
  }

  async #runBatch(state: KeyState<Item, Result>, batch: Waiting<Item, Result>[]): Promise<void> {
    let results: Result[];
    try {
      results = await this.#run(batch.map((waiting) => waiting.item));
      if (results.length !== batch.length) throw new Error(`a batch of ${batch.length} answered ${results.length} results`);
    } catch (error) {
      if (batch.length === 1) (batch[0] as Waiting<Item, Result>).reject(error);
      else {
        // Each item again alone, ahead of what arrived since, in their order.
        for (const waiting of batch) waiting.alone = true;
        state.waiting.unshift(...batch);
      }
      return;
    }
    batch.forEach((waiting, i) => {
      waiting.resolve(results[i] as Result);
    });
  }
}

interface Waiting<Item, Result> {
  item: Item;
  /** Sent back from a failed batch: runs alone. */
  alone: boolean;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
}

interface KeyState<Item, Result> {
  running: number;
  waiting: Waiting<Item, Result>[];
}
