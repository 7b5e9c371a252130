import { type Migration, type MigrationProvider, Migrator } from 'kysely';
import { auditMigrations } from '../../audit/migrations.ts';
import { authMigrations } from '../../auth/migrations.ts';
import { capacityMigrations } from '../../capacity/migrations.ts';
import { consoleMigrations } from '../../console/migrations.ts';
import { customerMigrations } from '../../customers/migrations.ts';
import { eventMigrations } from '../../events/migrations.ts';
import { operationMigrations } from '../../operations/migrations.ts';
import { partnerMigrations } from '../../partners/migrations.ts';
import { sandboxMigrations } from '../../platform/sandbox/migrations.ts';
import { projectMigrations } from '../../projects/migrations.ts';
import { userMigrations } from '../../users/migrations.ts';
import { webhookMigrations } from '../../webhooks/migrations.ts';
import { idempotencyMigrations } from '../idempotency/migrations.ts';
import { rateLimitMigrations } from '../rate-limit/migrations.ts';
import { secretMigrations } from '../secrets/migrations.ts';
import type { Db } from './database.ts';

/**
 * Every module's migrations, keyed by a name that sorts in the order they must
 * run (`NNNN_module_what`). Kysely applies them in one transaction under a
 * PostgreSQL advisory lock, so processes starting together do not race.
 */
const allMigrations: Record<string, Migration> = {
  ...secretMigrations,
  ...partnerMigrations,
  ...authMigrations,
  ...auditMigrations,
  ...idempotencyMigrations,
  ...rateLimitMigrations,
  ...customerMigrations,
  ...projectMigrations,
  ...userMigrations,
  ...operationMigrations,
  ...eventMigrations,
  ...sandboxMigrations,
  ...consoleMigrations,
  ...webhookMigrations,
  ...capacityMigrations,
};

const provider: MigrationProvider = { getMigrations: async () => allMigrations };

export async function migrateToLatest(db: Db): Promise<string[]> {
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
