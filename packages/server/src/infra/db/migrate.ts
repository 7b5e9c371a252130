import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';

const MIGRATION_TABLE = 'schema_migrations';

/**
 * Applies the migrations it is given (the composition root lists every module's), in the order
 * of their names, in one transaction under a PostgreSQL advisory lock, so processes starting
 * together do not race.
 *
 * A database that already has exactly these migrations is left alone after two small reads (decision
 * 271): Kysely's migrator first lists every column of every table twice (its introspection, with two
 * catalog functions per column) and then takes its lock, which cost an embedded database's restart
 * about a third of a second. Anything else (a new database, a migration to apply, one this code does not
 * know) goes to the migrator, which decides under its lock.
 */
export async function migrateToLatest<DB>(db: Kysely<DB>, migrations: Record<string, Migration>): Promise<string[]> {
  if (await alreadyApplied(db, Object.keys(migrations))) return [];
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({
    db,
    provider,
    migrationTableName: MIGRATION_TABLE,
    migrationLockTableName: 'schema_migrations_lock',
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** True when the migration table exists and names exactly `names`, no more and no fewer. */
async function alreadyApplied<DB>(db: Kysely<DB>, names: string[]): Promise<boolean> {
  const { rows } = await sql<{ present: boolean }>`select to_regclass(${MIGRATION_TABLE}) is not null as present`.execute(db);
  if (rows[0]?.present !== true) return false;
  const applied = await sql<{ name: string }>`select name from ${sql.table(MIGRATION_TABLE)}`.execute(db);
  const known = new Set(names);
  return applied.rows.length === known.size && applied.rows.every((row) => known.has(row.name));
}
