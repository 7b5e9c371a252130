import type { ScheduledTask, Scheduler } from '../infra/scheduler.ts';
import type { Listed } from './kube.ts';

export interface ListWatchOptions<T> {
  /** What is watched, for logs. */
  what: string;
  list: () => Promise<Listed<T>>;
  watch: (
    resourceVersion: string,
    onEvent: (type: string, object: Record<string, unknown>) => void,
    done: (error: unknown) => void,
  ) => Promise<AbortController>;
  /** The full state after every list. */
  onSync: (items: T[]) => void;
  onEvent: (type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T) => void;
  scheduler: Scheduler;
  /** A full re-list this often, whatever the watch says (drift repair). */
  resyncMs: number;
  log: (message: string) => void;
  onError?: () => void;
}

const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

/**
 * List, then watch from the list's resourceVersion, like an informer. A watch the server closes cleanly is
 * resumed from the last version seen; an expired version (410) re-lists at once; a dropped connection or an
 * API error re-lists after a backoff (1 s doubling to 30 s, with jitter). Every `resyncMs` the whole state is
 * listed again.
 */
export class ListWatch<T> {
  readonly #o: ListWatchOptions<T>;
  #stopped = true;
  #abort: AbortController | undefined;
  #task: ScheduledTask | undefined;
  #resync: ScheduledTask | undefined;
  #failures = 0;
  #version = '';
  /** Bumped whenever a new list starts, so that callbacks of an older watch are ignored. */
  #generation = 0;
  #synced = false;

  constructor(options: ListWatchOptions<T>) {
    this.#o = options;
  }

  get synced(): boolean {
    return this.#synced;
  }

  start(): void {
    this.#stopped = false;
    this.#task = this.#o.scheduler.schedule(0, () => this.#relist());
  }

  stop(): void {
    this.#stopped = true;
    this.#task?.cancel();
    this.#resync?.cancel();
    this.#generation += 1;
    this.#abort?.abort();
  }

  async #relist(): Promise<void> {
    if (this.#stopped) return;
    const generation = ++this.#generation;
    this.#abort?.abort();
    this.#resync?.cancel();
    try {
      const listed = await this.#o.list();
      if (this.#stopped || generation !== this.#generation) return;
      this.#version = listed.resourceVersion;
      this.#o.onSync(listed.items);
      this.#synced = true;
      this.#failures = 0;
      this.#resync = this.#o.scheduler.schedule(this.#o.resyncMs, () => this.#relist());
      await this.#startWatch(generation);
    } catch (error) {
      this.#retry(generation, `list failed: ${(error as Error).message}`);
    }
  }

  async #startWatch(generation: number): Promise<void> {
    let expired = false;
    const onEvent = (type: string, object: Record<string, unknown>) => {
      if (generation !== this.#generation) return;
      const version = (object.metadata as { resourceVersion?: string } | undefined)?.resourceVersion;
      if (type === 'ERROR') {
        expired = (object as { code?: number }).code === 410;
        return;
      }
      if (version) this.#version = version;
      this.#failures = 0;
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') this.#o.onEvent(type, object as T);
    };
    const done = (error: unknown) => {
      if (this.#stopped || generation !== this.#generation) return;
      if (expired) {
        this.#o.log(`${this.#o.what}: watch version expired, listing again`);
        this.#task = this.#o.scheduler.schedule(0, () => this.#relist());
      } else if (error === null || error === undefined) {
        // A server-side timeout: resume from the last version seen.
        this.#task = this.#o.scheduler.schedule(0, () => this.#rewatch(generation));
      } else this.#retry(generation, `watch ended: ${(error as Error).message ?? String(error)}`);
    };
    try {
      this.#abort = await this.#o.watch(this.#version, onEvent, done);
    } catch (error) {
      this.#retry(generation, `watch failed: ${(error as Error).message}`);
    }
  }

  async #rewatch(generation: number): Promise<void> {
    if (this.#stopped || generation !== this.#generation) return;
    await this.#startWatch(generation);
  }

  #retry(generation: number, message: string): void {
    if (this.#stopped || generation !== this.#generation) return;
    this.#generation += 1;
    this.#o.onError?.();
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this.#failures);
    this.#failures += 1;
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.#o.log(`${this.#o.what}: ${message}; listing again in ${delay} ms`);
    this.#task = this.#o.scheduler.schedule(delay, () => this.#relist());
  }
}
