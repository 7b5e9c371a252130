import { type Kysely, sql } from 'kysely';
import type { Logger } from 'pino';

/** What one pass did to one table: how long its vacuum and its analyze took (null: not run). */
export interface UpkeepStep {
  table: string;
  vacuumMs: number | null;
  analyzeMs: number | null;
}

/**
 * The statistics target of the upkeep's analyze: 10 (PostgreSQL's default is 100) samples 3,000 rows
 * a table, not 30,000, and keeps 10 common values and 10 histogram buckets a column; enough for plans
 * that look rows up by key, at a tenth of the time the one connection is held.
 */
const STATISTICS_TARGET = 10;

interface TableActivity {
  table: string;
  /** PostgreSQL's count of the table's rows as of its last vacuum or analyze; -1 before the first. */
  reltuples: number;
  n_dead_tup: number;
  n_mod_since_analyze: number;
  n_ins_since_vacuum: number;
}

/**
 * autovacuum's default thresholds (PostgreSQL's `autovacuum_*` settings): a table is vacuumed once its
 * dead rows pass 50 + 20% of its rows, or its rows inserted since the last vacuum 1,000 + 20% (the
 * visibility map, so that reads can skip its pages); it is analyzed once its rows changed since the last
 * analyze pass 50 + 10%.
 */
export function upkeepNeeded(activity: TableActivity): { vacuum: boolean; analyze: boolean } {
  const rows = Math.max(0, activity.reltuples);
  return {
    vacuum: activity.n_dead_tup > 50 + 0.2 * rows || activity.n_ins_since_vacuum > 1_000 + 0.2 * rows,
    analyze: activity.n_mod_since_analyze > 50 + 0.1 * rows,
  };
}

/**
 * One pass of what PostgreSQL's autovacuum does, for a database that has none: PGlite runs PostgreSQL
 * as a single-user backend, where no background process vacuums or analyzes. Without
 * it the space of deleted and updated rows is never reused (a table only grows), and the planner keeps
 * the statistics of the day a table was made, plans prepared then included. Each table whose activity
 * passed autovacuum's thresholds is vacuumed or analyzed (or both), each in a statement of its own, so
 * other statements run between two (`include` names the tables it may touch; all by default).
 * Answers what it did.
 */
export async function runUpkeep<DB>(db: Kysely<DB>, include: (table: string) => boolean = () => true): Promise<UpkeepStep[]> {
  // The statistics this backend gathered are reported at once, not within the next second.
  await sql`select pg_stat_force_next_flush()`.execute(db);
  const { rows } = await sql<TableActivity>`
    select s.relname as "table", c.reltuples::float8 as reltuples, s.n_dead_tup::float8 as n_dead_tup,
           s.n_mod_since_analyze::float8 as n_mod_since_analyze, s.n_ins_since_vacuum::float8 as n_ins_since_vacuum
      from pg_stat_user_tables s join pg_class c on c.oid = s.relid
     where s.schemaname = current_schema()
     order by s.relname`.execute(db);
  const steps: UpkeepStep[] = [];
  const timed = async (run: () => Promise<unknown>) => {
    const started = performance.now();
    await run();
    return Math.round(performance.now() - started);
  };
  for (const activity of rows) {
    const { vacuum, analyze } = upkeepNeeded(activity);
    if ((!vacuum && !analyze) || !include(activity.table)) continue;
    const table = sql.id(activity.table);
    // Two statements, so that what waits for the one connection runs between them.
    const vacuumMs = vacuum ? await timed(() => sql`vacuum ${table}`.execute(db)) : null;
    const analyzeMs = analyze
      ? await timed(() =>
          db.transaction().execute(async (trx) => {
            await sql`set local default_statistics_target = ${sql.lit(STATISTICS_TARGET)}`.execute(trx);
            await sql`analyze ${table}`.execute(trx);
          }),
        )
      : null;
    steps.push({ table: activity.table, vacuumMs, analyzeMs });
  }
  return steps;
}

/**
 * Runs `runUpkeep` every `intervalMs` (the server's 10 s; autovacuum's own pace is a minute), one pass at a time, the first
 * an interval after the start: nothing at start-up competes with the first requests. What a pass did is
 * logged; a pass that failed is logged and the next one tries again. `stop()` waits for a pass in progress.
 */
export function startUpkeep<DB>(db: Kysely<DB>, intervalMs: number, logger: Logger): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    running ??= runUpkeep(db)
      .then((steps) => {
        if (steps.length > 0) logger.info({ tables: steps }, 'embedded database vacuumed or analyzed where autovacuum would have');
      })
      .catch((err: unknown) => logger.warn({ err }, 'embedded database upkeep failed'))
      .finally(() => {
        running = undefined;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
