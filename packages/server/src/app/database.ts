import type { Kysely, Migration } from 'kysely';
import { auditMigrations } from '../audit/migrations.ts';
import type { AuditTables } from '../audit/tables.ts';
import { authMigrations } from '../auth/migrations.ts';
import type { AuthTables } from '../auth/tables.ts';
import { capacityMigrations } from '../capacity/migrations.ts';
import type { CapacityTables } from '../capacity/tables.ts';
import { consoleMigrations } from '../console/migrations.ts';
import type { ConsoleTables } from '../console/tables.ts';
import { customerMigrations } from '../customers/migrations.ts';
import type { CustomerTables } from '../customers/tables.ts';
import { eventMigrations } from '../events/migrations.ts';
import type { EventTables } from '../events/tables.ts';
import { type DatabaseHandle, type DatabaseTarget, openDatabase } from '../infra/db/database.ts';
import type { Db as Handle } from '../infra/db/handle.ts';
import { migrateToLatest } from '../infra/db/migrate.ts';
import { idempotencyMigrations } from '../infra/idempotency/migrations.ts';
import type { IdempotencyTables } from '../infra/idempotency/tables.ts';
import { rateLimitMigrations } from '../infra/rate-limit/migrations.ts';
import type { RateLimitTables } from '../infra/rate-limit/tables.ts';
import { secretMigrations } from '../infra/secrets/migrations.ts';
import type { SecretTables } from '../infra/secrets/tables.ts';
import { operationMigrations } from '../operations/migrations.ts';
import type { OperationTables } from '../operations/tables.ts';
import { partnerMigrations } from '../partners/migrations.ts';
import type { PartnerTables } from '../partners/tables.ts';
import { sandboxMigrations } from '../platform/sandbox/migrations.ts';
import type { SandboxTables } from '../platform/sandbox/tables.ts';
import { projectMigrations } from '../projects/migrations.ts';
import type { ProjectTables } from '../projects/tables.ts';
import { userMigrations } from '../users/migrations.ts';
import type { UserTables } from '../users/tables.ts';
import { webhookMigrations } from '../webhooks/migrations.ts';
import type { WebhookTables } from '../webhooks/tables.ts';

/**
 * The database as the composition root sees it: every module's tables merged, so Kysely
 * type-checks every query. Each module owns its tables (their types, migrations and store); a
 * module's code reads and writes only its own, and asks the owner for anything else.
 */
export interface Database
  extends SecretTables,
    PartnerTables,
    AuthTables,
    AuditTables,
    IdempotencyTables,
    RateLimitTables,
    CustomerTables,
    ProjectTables,
    UserTables,
    OperationTables,
    EventTables,
    WebhookTables,
    CapacityTables,
    ConsoleTables,
    SandboxTables {}

export type Db = Kysely<Database>;

/**
 * A handle a module passes to a listener wired here (the console's revocation, in the transaction that
 * suspends a customer), as the listener's module needs it. The module types it on the tables it knows;
 * every handle the composition root hands out is on the whole database.
 */
export function wholeDatabase<Tables>(db: Handle<Tables>): Handle<Database> {
  return db as unknown as Handle<Database>;
}
export type AppDatabase = DatabaseHandle<Database>;

/**
 * Every module's migrations, keyed by a name that sorts in the order they must run
 * (`NNNN_module_what`). Kysely applies them in one transaction under a PostgreSQL advisory lock,
 * so processes starting together do not race. A platform driver's tables are listed here too: adding
 * a driver edits no shared file but this composition root.
 */
export const MIGRATIONS: Record<string, Migration> = {
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

export function openAppDatabase(target: DatabaseTarget): Promise<AppDatabase> {
  return openDatabase<Database>(target);
}

export function migrate(db: Db): Promise<string[]> {
  return migrateToLatest(db, MIGRATIONS);
}
