import { type Kysely, type Migration, type MigrationProvider, Migrator } from 'kysely';

/**
 * Applies the migrations it is given (the composition root lists every module's), in the order
 * of their names, in one transaction under a PostgreSQL advisory lock, so processes starting
 * together do not race.
 */
export async function migrateToLatest<DB>(db: Kysely<DB>, migrations: Record<string, Migration>): Promise<string[]> {
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({
    db,
    provider,
    migrationTableName: 'schema_migrations',
    migrationLockTableName: 'schema_migrations_lock',
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
