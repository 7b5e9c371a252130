import { sql } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import type { ApiKeyRow } from './keys-store.ts';
import type { AuthTables } from './tables.ts';

/** `last_used_at` is kept to the minute: at most one write per key per minute. */
const TOUCH_INTERVAL_MS = 60_000;
/** How long a use waits in memory before it is written, with the others of that second. */
const FLUSH_AFTER_MS = 1_000;

/**
 * When each API key was last used, written in batches: a token exchange records the use in memory and
 * answers; one UPDATE a second writes every key used since. The operator's key list
 * flushes first, so this process's uses are always visible there; another process's appear within a
 * second. A process killed with -9 loses at most that second, which the minute's precision allows.
 */
export class KeyUsage {
  readonly #db: Db<AuthTables>;
  readonly #pending = new Map<string, Date>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();

  constructor(db: Db<AuthTables>) {
    this.#db = db;
  }

  /** Records that `row`'s key was used at `at`, unless its stored use is recent enough. */
  record(row: ApiKeyRow, at: Date): void {
    if (row.last_used_at && at.getTime() - row.last_used_at.getTime() < TOUCH_INTERVAL_MS) return;
    this.#pending.set(row.kid, at);
    this.#timer ??= setTimeout(() => {
      this.flush().catch(() => {});
    }, FLUSH_AFTER_MS).unref();
  }

  /** Writes every recorded use; resolves when they (and any write already under way) are stored. */
  flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending.size === 0) return this.#flushing;
    const uses = [...this.#pending];
    this.#pending.clear();
    const kids = uses.map(([kid]) => kid);
    const ats = uses.map(([, at]) => at.toISOString());
    const write = async () => {
      // One statement for the batch, with the same text and two values however many keys it carries:
      // prepared once, and never near PostgreSQL's 65,535 values a statement (a list of pairs made one
      // text per length, and failed past 32,767 keys). A newer stored use (another process's) is never
      // moved back.
      await sql`
        update api_keys set last_used_at = used.at
        from unnest(${kids}::text[], ${ats}::timestamptz[]) as used (kid, at)
        where api_keys.kid = used.kid and (api_keys.last_used_at is null or api_keys.last_used_at < used.at)`.execute(this.#db);
    };
    this.#flushing = this.#flushing.then(write, write);
    return this.#flushing;
  }
}
