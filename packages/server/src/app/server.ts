import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import type { EventStreamOptions } from '../events/stream.ts';
import { catalogueSourceFor } from '../images/source-for.ts';
import { type Clock, systemClock } from '../infra/clock.ts';
import { prepareDataDir, writePrivateFile } from '../infra/data-dir.ts';
import { startUpkeep } from '../infra/db/upkeep.ts';
import type { DeferredSchemas, WarmUp } from '../infra/http/deferred-schemas.ts';
import { forgetExpiredAnswers } from '../infra/idempotency/answer.ts';
import { createLogger, flushLog } from '../infra/log/logger.ts';
import { createDataDirKey, loadSecretKeys } from '../infra/secrets/secret-key.ts';
import { startTracing, stopTracing } from '../infra/telemetry/tracing.ts';
import { buildOperatorApp } from '../operator/operator-app.ts';
import { findOverlappingPrefixes } from '../partners/prefixes.ts';
import { platformDriver } from '../platform/drivers.ts';
import type { Platform } from '../platform/platform.ts';
import type { SandboxPlatform } from '../platform/sandbox/sandbox-platform.ts';
import type { Resolver } from '../webhooks/destination.ts';
import { type AppDatabase as DatabaseHandle, migrate, openAppDatabase } from './database.ts';
import { listenStartupError } from './listeners.ts';
import { type MadeApart, makeNewEmbeddedDatabaseApart } from './new-embedded-database.ts';
import { buildPartnerApp, type PartnerRoute } from './partner-app.ts';
import { createServices, type Services } from './services.ts';
import { databaseStartupError } from './startup-errors.ts';

export interface RunningServer {
  services: Services;
  partnerUrl: string;
  operatorUrl: string;
  operatorToken: string;
  /** Every route of the partner API with its scope (undefined: public), as registered. */
  partnerRoutes(): PartnerRoute[];
  /** What compiling both APIs' schemas after the start did: settles when done, or at close. */
  schemasWarmed: Promise<SchemasWarmed>;
  /** Drains in-flight requests, stops background work and closes the database. */
  close(): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  logger?: Logger;
  /** An already-open database (tests share one across servers). */
  database?: DatabaseHandle;
  /**
   * The child making a new embedded database, started by the caller before it loaded the server
   * (`makeNewEmbeddedDatabaseApart`); without it, the server starts one itself when the database is new.
   */
  embeddedMade?: Promise<MadeApart> | undefined;
  /** More partner API routes, mounted under the prefix with every cross-cutting rule (tests mount fixtures here). */
  partnerRoutes?: FastifyPluginAsync<{ services: Services }>[];
  /** The sandbox's address ranges per partner and mode (tests shrink it to reach NO_ADDRESS_SPACE). */
  sandboxAddressRanges?: number;
  /** How often the operation engine looks for due work (ms). */
  enginePollMs?: number;
  /** How often the webhook dispatcher looks for due deliveries (ms). */
  webhookPollMs?: number;
  /** How often the embedded database's upkeep looks at its tables (default 10 s). */
  upkeepIntervalMs?: number;
  /** How webhook hosts are resolved (tests answer chosen addresses). */
  webhookResolver?: Resolver;
  /** The live platform's driver, given the sandbox (tests put a platform that misbehaves in front of it). */
  livePlatform?: (sandbox: SandboxPlatform) => Platform;
  /** The event stream's timing (tests poll faster). */
  eventStreams?: Partial<EventStreamOptions>;
}

const MAINTENANCE_INTERVAL_MS = 10 * 60 * 1000;
/**
 * The upkeep looks every 10 s, not at autovacuum's minute: a statement prepared while its table was small
 * keeps its plan until an analyze, and a table that grows fast is read whole by each run meanwhile.
 */
const UPKEEP_INTERVAL_MS = 10 * 1000;

/** `--watch-partners`: Kube-DC Partner resources become the source of partners' settings (loaded only then). */
async function startPartnerWatcher(
  settings: NonNullable<Config['watchPartners']>,
  services: Services,
  logger: Logger,
): Promise<{ stop(): Promise<void> }> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const { PartnerWatcher } = await import('../partners/partner-watcher.ts');
  const { systemScheduler } = await import('../infra/scheduler.ts');
  const kubeConfig = new KubeConfig();
  if (settings.kubeconfig) kubeConfig.loadFromFile(settings.kubeconfig);
  else kubeConfig.loadFromCluster();
  const watcher = new PartnerWatcher({
    kubeConfig,
    namespace: settings.namespace,
    partners: services.partners,
    capacity: services.capacity,
    scheduler: systemScheduler,
    logger: logger.child({ component: 'watch-partners' }),
  });
  watcher.start();
  logger.info({ namespace: settings.namespace ?? '*' }, 'partners are read from partners.kube-dc.com resources');
  return watcher;
}

/** Live mode runs on the configured driver (TENANTRY_PLATFORM); test mode stays on the sandbox. */
async function livePlatform(config: Config, logger: Logger): Promise<StartOptions['livePlatform']> {
  const driver = platformDriver(config.platform);
  if (!driver.live) return undefined;
  const live = await driver.live(config.platformSettings, logger);
  logger.info({ platform: driver.name }, 'live mode provisions on the configured platform');
  return () => live;
}

/** `tenantry serve`: both APIs, their database and background work, in one process. */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  // Buffered, asynchronous log writes keep logging off the request's critical
  // path; the buffer is flushed every second, on shutdown (and by pino on exit).
  const logger = options.logger ?? createLogger(config.logLevel);
  const clock = options.clock ?? systemClock;
  // A child the caller started to make a new embedded database finishes first: until it closes the
  // database, some of its files have PGlite's own modes, which the data directory's check refuses.
  const madeEarly = await options.embeddedMade;
  // The data directory holds the embedded database, the generated operator token and the secret
  // key file, whichever of them this deployment uses: owner-only, or start-up stops.
  const usesDataDir =
    (options.database === undefined && config.databaseUrl === undefined) ||
    config.operatorToken === undefined ||
    (config.secretKey === undefined && config.secretKeyFile === undefined);
  if (usesDataDir) {
    const { repaired } = prepareDataDir(config.dataDir, { fix: config.fixPermissions });
    if (repaired > 0) logger.warn({ data_dir: config.dataDir, entries: repaired }, 'data directory made owner-only');
  }
  const configuredKeys = loadSecretKeys(config);
  const embeddedDir = join(config.dataDir, 'db');
  let madeApart: string[] = [];
  if (options.database === undefined && config.databaseUrl === undefined) {
    // A new embedded database is made by a child process, so that this one idles as on a restart.
    const made = madeEarly ?? (await makeNewEmbeddedDatabaseApart(config.dataDir));
    if (made && 'applied' in made) madeApart = made.applied;
    if (made && 'error' in made)
      logger.warn({ problem: made.error }, 'making the embedded database in a separate process failed; making it here');
  }
  const database =
    options.database ??
    (await openAppDatabase(
      config.databaseUrl
        ? {
            kind: 'postgres',
            url: config.databaseUrl,
            statementCache: config.databaseStatementCache,
            poolSize: config.databasePoolSize,
          }
        : { kind: 'embedded', dataDir: embeddedDir },
    ).catch((error: unknown) => {
      throw databaseStartupError(error, config.databaseUrl, config.dataDir) ?? error;
    }));
  const ownsDatabase = options.database === undefined;

  let publicUrl = config.publicUrl;
  // Traces: the OpenTelemetry SDK is loaded only when a collector is configured, before the apps it instruments.
  let tracingStarted = false;
  try {
    if (config.tracing) {
      tracingStarted = true;
      await startTracing(config.tracing, logger);
    }
    // The first statement: an unreachable database is reported here, naming its setting.
    const applied = await migrate(database.db).catch((error: unknown) => {
      throw databaseStartupError(error, config.databaseUrl, config.dataDir) ?? error;
    });
    if (madeApart.length > 0) logger.info({ migrations: madeApart }, 'embedded database created and migrated by a separate process');
    if (applied.length > 0) logger.info({ migrations: applied }, 'database migrated');
    // A migration rewrites files of the embedded database (relation caches); opening it was secured above.
    if (applied.length > 0) database.secureFiles();
    // A data directory without a key file gets one only if the database has sealed nothing yet.
    const secretKeys = configuredKeys ?? (await createDataDirKey(database.db, config.dataDir));
    const services = await createServices({
      database,
      secretBox: secretKeys.box,
      secretKeyOrigin: secretKeys.origin,
      clock,
      logger,
      partnerCacheMs: config.partnerCacheMs,
      engineConcurrency: config.engineConcurrency,
      webhookConcurrency: config.webhookConcurrency,
      sandboxDelayMs: config.sandboxDelayMs,
      sandboxCallMs: config.sandboxCallMs,
      trustProxy: config.trustProxy,
      publicUrl: () => publicUrl,
      sandboxAddressRanges: options.sandboxAddressRanges,
      webhookCa: config.webhookCa,
      webhookResolver: options.webhookResolver,
      livePlatform: options.livePlatform ?? (await livePlatform(config, logger)),
      osImagesSource: await catalogueSourceFor({
        osImagesFile: config.osImagesFile,
        cluster: platformDriver(config.platform).imageCluster?.(config.platformSettings),
      }),
      eventStreams: options.eventStreams,
    });
    // Prefixes that overlap (left by an earlier version) stay usable: the organization's unique name keeps one
    // partner off another's, but the later create answers 409 for an id that partner does not have. Told, not
    // refused: most of their creates never meet, and only the operator can choose a new prefix.
    const overlapping = await findOverlappingPrefixes(database.db);
    if (overlapping.length > 0)
      logger.warn(
        { overlapping },
        "customer prefixes overlap: two partners' customers can need one platform name, and the later create is refused as if the id were taken; give one partner of each pair another prefix (tenantry partners update <id> --customer-prefix <prefix>; it names new customers only)",
      );
    // The catalogue is read before serving (a read is bounded by its timeout), then every 30 s.
    await services.images.refresh();
    services.images.start();
    const operatorToken = config.operatorToken ?? loadOrCreateOperatorToken(config.dataDir);

    const partnerApp = await buildPartnerApp(services, logger, options.partnerRoutes);
    const operatorApp = await buildOperatorApp(services, logger, operatorToken, config.metricsScrapeToken);
    const partnerUrl = await partnerApp.listen({ host: config.listen.host, port: config.listen.port }).catch(async (error: unknown) => {
      await operatorApp.close();
      throw listenStartupError(error, 'partner', config.listen) ?? error;
    });
    publicUrl = config.publicUrlConfigured ? config.publicUrl : partnerUrl;
    const operatorUrl = await operatorApp
      .listen({ host: config.operatorListen.host, port: config.operatorListen.port })
      .catch(async (error: unknown) => {
        await partnerApp.close();
        throw listenStartupError(error, 'operator', config.operatorListen) ?? error;
      });

    // Background work resumes from the database: whatever a killed process left open is picked up here.
    await services.engine.start(options.enginePollMs);
    const partnerWatcher = config.watchPartners ? await startPartnerWatcher(config.watchPartners, services, logger) : undefined;
    await services.dispatcher.start(options.webhookPollMs);
    // Deliveries queued here wake the dispatcher at once; the poll interval covers other processes' events.
    const stopEventWakes = services.webhooks.onQueued(() => services.dispatcher.eventsRecorded());
    // PGlite has no autovacuum (a single-user backend): the server does its work. A
    // PostgreSQL server's own autovacuum does it there.
    const upkeep = database.embedded
      ? startUpkeep(database.db, options.upkeepIntervalMs ?? UPKEEP_INTERVAL_MS, logger.child({ component: 'upkeep' }))
      : undefined;

    const maintenance = setInterval(() => {
      const now = clock.now();
      forgetExpiredAnswers(database.db, now).catch((err: unknown) => logger.warn({ err }, 'idempotency cleanup failed'));
      services.operations.deleteExpired(now).catch((err: unknown) => logger.warn({ err }, 'operation cleanup failed'));
      services.console.deleteExpired().catch((err: unknown) => logger.warn({ err }, 'console cleanup failed'));
      services.vms.deleteOrphanRecords().catch((err: unknown) => logger.warn({ err }, 'console VM records cleanup failed'));
      services.events.deleteExpired(now).catch((err: unknown) => logger.warn({ err }, 'event cleanup failed'));
      services.webhooks.deleteExpired(now).catch((err: unknown) => logger.warn({ err }, 'webhook delivery cleanup failed'));
      try {
        database.secureFiles();
      } catch (err) {
        logger.warn({ err }, 'making the data directory owner-only failed');
      }
    }, MAINTENANCE_INTERVAL_MS);
    maintenance.unref();

    logger.info(
      {
        partner_api: partnerUrl,
        operator_api: operatorUrl,
        embedded_database: database.embedded,
        secret_key: { id: secretKeys.box.activeKeyId, source: secretKeys.source },
      },
      'tenantry serving',
    );
    flushLog(logger);
    // The validators and serialisers no request has compiled yet, between requests, not at start.
    const schemas = [partnerApp.schemas, operatorApp.schemas];
    const schemasWarmed = warmSchemas(schemas, logger);
    // A quiet server still writes its log lines within a second.
    const logFlush = setInterval(() => flushLog(logger), 1_000);
    logFlush.unref();

    let closing: Promise<void> | undefined;
    return {
      services,
      partnerUrl,
      operatorUrl,
      operatorToken,
      partnerRoutes: () => partnerApp.partnerRoutes,
      schemasWarmed,
      close: () => {
        closing ??= (async () => {
          for (const deferred of schemas) deferred.stop();
          await schemasWarmed;
          clearInterval(maintenance);
          clearInterval(logFlush);
          await upkeep?.stop();
          await Promise.all([partnerApp.close(), operatorApp.close()]);
          await partnerWatcher?.stop();
          await services.engine.stop();
          stopEventWakes();
          await services.dispatcher.stop();
          await services.images.stop();
          services.webhookSender.close();
          await services.keyUsage.flush().catch((err: unknown) => logger.warn({ err }, "writing API keys' last use failed"));
          if (ownsDatabase) await database.close();
          if (tracingStarted) await stopTracing();
          logger.info('tenantry stopped');
          flushLog(logger);
        })();
        return closing;
      },
    };
  } catch (error) {
    if (ownsDatabase) await database.close().catch(() => {});
    if (tracingStarted) await stopTracing();
    throw error;
  }
}

export interface SchemasWarmed {
  /** Schemas the warm-up compiled (a request may have compiled others first). */
  compiled: number;
  /** Schemas left to compile when it ended: none, unless the server closed first or a schema failed. */
  remaining: number;
  /** Schemas that do not compile: the route and part of each, with the compiler's error. */
  failed: WarmUp['failed'];
}

/** Compiles both APIs' deferred schemas, one app after the other, and says what it did. */
async function warmSchemas(schemas: DeferredSchemas[], logger: Logger): Promise<SchemasWarmed> {
  const warmed: SchemasWarmed = { compiled: 0, remaining: 0, failed: [] };
  let ms = 0;
  for (const deferred of schemas) {
    const done = await deferred.warm();
    warmed.compiled += done.compiled;
    warmed.failed.push(...done.failed);
    ms += done.ms;
  }
  for (const { what, error } of warmed.failed)
    logger.error({ err: error, schema: what }, 'a schema does not compile; requests that need it fail');
  warmed.remaining = schemas.reduce((sum, deferred) => sum + deferred.pending, 0);
  logger.info({ compiled: warmed.compiled, remaining: warmed.remaining, ms: Math.round(ms) }, 'schemas compiled');
  return warmed;
}

/**
 * The operator token of a deployment that did not configure one: generated on
 * first start into the data directory (mode 0600), read on later starts.
 */
export function loadOrCreateOperatorToken(dataDir: string): string {
  const path = join(dataDir, 'operator-token');
  writePrivateFile(path, `${randomBytes(32).toString('base64url')}\n`, { onlyIfAbsent: true });
  return readFileSync(path, 'utf8').trim();
}
