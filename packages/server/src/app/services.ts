import type { Logger } from 'pino';
import { AccessTokenCodec } from '../auth/access-tokens.ts';
import { KeyCache } from '../auth/key-cache.ts';
import { KeyUsage } from '../auth/key-usage.ts';
import { KeyService } from '../auth/keys-service.ts';
import { AuthService } from '../auth/service.ts';
import { type QuotaCustomer, QuotaService } from '../capacity/quotas.ts';
import { CapacityService } from '../capacity/service.ts';
import { ConsoleService } from '../console/service.ts';
import { ConsoleSessionCache } from '../console/session-cache.ts';
import { ConsoleVmService } from '../console/vms.ts';
import { organizationRef } from '../customers/lifecycle.ts';
import { CustomerService } from '../customers/service.ts';
import { registerCustomerSteps } from '../customers/steps.ts';
import type { CustomerRow } from '../customers/tables.ts';
import { EventService } from '../events/service.ts';
import { type EventStreamOptions, EventStreams } from '../events/stream.ts';
import { OsImageCatalogue } from '../images/catalogue.ts';
import { bundledSource, type CatalogueSource } from '../images/sources.ts';
import type { Clock } from '../infra/clock.ts';
import { ServerMetrics } from '../infra/metrics/metrics.ts';
import { CursorCodec } from '../infra/pagination/cursor.ts';
import { createLocalRateLimiter, createRateLimiter } from '../infra/rate-limit/rate-limiter.ts';
import type { SecretBox, SecretKeyOrigin } from '../infra/secrets/secret-box.ts';
import { loadServerSecrets } from '../infra/secrets/server-secrets.ts';
import { OperationEngine } from '../operations/engine.ts';
import { OperationService } from '../operations/service.ts';
import { PartnerCache } from '../partners/partner-cache.ts';
import { PartnerService } from '../partners/service.ts';
import type { Platform } from '../platform/platform.ts';
import { platformRouter } from '../platform/router.ts';
import { SandboxPlatform } from '../platform/sandbox/sandbox-platform.ts';
import { ProjectService } from '../projects/service.ts';
import { registerProjectSteps } from '../projects/steps.ts';
import { TestHelperService } from '../test-mode/service.ts';
import { UsageService } from '../usage/service.ts';
import { UserService } from '../users/service.ts';
import { DestinationGuard, type Resolver } from '../webhooks/destination.ts';
import { WebhookDispatcher } from '../webhooks/dispatcher.ts';
import { resealWebhookSecrets, WebhookSecrets } from '../webhooks/secrets.ts';
import { WebhookSender } from '../webhooks/sender.ts';
import { WebhookService } from '../webhooks/service.ts';
import { customerAccess } from './customer-access.ts';
import type { AppDatabase as DatabaseHandle } from './database.ts';
import { wholeDatabase } from './database.ts';

/** What the composition root needs to know to wire the modules together. */
export interface ServiceOptions {
  database: DatabaseHandle;
  /** Seals and opens secrets at rest, with the key kept outside the database. */
  secretBox: SecretBox;
  /** Where its keys came from: a key that does not open the database's secrets names it. */
  secretKeyOrigin?: SecretKeyOrigin | undefined;
  clock: Clock;
  logger: Logger;
  partnerCacheMs: number;
  /** Operations this process works on at once (TENANTRY_ENGINE_CONCURRENCY); unset: 8, or 1 on the embedded database. */
  engineConcurrency?: number | undefined;
  /** Webhook deliveries in flight to one receiver across every process (TENANTRY_WEBHOOK_CONCURRENCY). */
  webhookConcurrency: number;
  /** The sandbox platform's provisioning time; a new partner's credentials take a third of it. */
  sandboxDelayMs: number;
  /** The sandbox's simulated latency per call (TENANTRY_SANDBOX_CALL_MS). */
  sandboxCallMs?: number | undefined;
  /** The live platform's driver; the sandbox when unset (TENANTRY_PLATFORM=sandbox). */
  livePlatform?: ((sandbox: SandboxPlatform) => Platform) | undefined;
  trustProxy: false | number | string[];
  /** `{base_url}`: console login URLs are built on it (known once the partner API listens). */
  publicUrl: () => string;
  /** Address ranges per partner and mode in the sandbox (tests shrink it to reach NO_ADDRESS_SPACE). */
  sandboxAddressRanges?: number | undefined;
  /** PEM certificates trusted for webhook HTTPS besides the system's (TENANTRY_WEBHOOK_CA_FILE). */
  webhookCa?: string | undefined;
  /** How webhook hosts are resolved (tests answer chosen addresses). */
  webhookResolver?: Resolver | undefined;
  /** The event stream's timing (tests poll faster). */
  eventStreams?: Partial<EventStreamOptions> | undefined;
  /** Where the OS image catalogue is read (default: the bundled example). */
  osImagesSource?: CatalogueSource | undefined;
}

/** Every module's service, wired once per process. Routes receive what they use from here. */
export interface Services {
  options: ServiceOptions;
  cursors: CursorCodec;
  partners: PartnerService;
  partnerCache: PartnerCache;
  keys: KeyService;
  keyUsage: KeyUsage;
  auth: AuthService;
  /** The platform provisioning runs on. Test mode always runs on the sandbox (CONTRACT §5). */
  platform: Platform;
  sandbox: SandboxPlatform;
  engine: OperationEngine;
  customers: CustomerService;
  projects: ProjectService;
  users: UserService;
  operations: OperationService;
  console: ConsoleService;
  /** Console sessions for the OS image list (a short per-process cache) and the console's VMs. */
  consoleSessions: ConsoleSessionCache;
  vms: ConsoleVmService;
  /** The OS image catalogue the VM form offers. */
  images: OsImageCatalogue;
  testHelpers: TestHelperService;
  events: EventService;
  eventStreams: EventStreams;
  webhooks: WebhookService;
  dispatcher: WebhookDispatcher;
  webhookSender: WebhookSender;
  capacity: CapacityService;
  quotas: QuotaService;
  usage: UsageService;
  /** This process's metrics (`GET /metrics` on the operator listener). */
  metrics: ServerMetrics;
}

export async function createServices(options: ServiceOptions): Promise<Services> {
  const { database, clock } = options;
  const { db, embedded } = database;
  const secrets = await loadServerSecrets(db, options.secretBox, options.secretKeyOrigin);
  const resealed = await resealWebhookSecrets(db, options.secretBox);
  if (resealed > 0)
    options.logger.info({ webhooks: resealed, key_id: options.secretBox.activeKeyId }, 'webhook secrets sealed with the active key');
  const webhookSecrets = new WebhookSecrets(options.secretBox);
  const cursors = new CursorCodec(secrets.cursorKey);
  const partnerCache = new PartnerCache(db, clock, options.partnerCacheMs);
  const keyCache = new KeyCache(db, clock);
  const rateLimiter = createRateLimiter(db, embedded, clock);
  const keyUsage = new KeyUsage(db);
  const logger = options.logger;
  // The sandbox stands in for a platform of its own: its objects commit without waiting for the disk
  // because an operation that loses them to a database crash makes them again.
  const sandboxDb = await database.asynchronousCommit((reason) =>
    logger.warn({ reason }, "the sandbox's writes wait for the disk: asynchronous commit is not available"),
  );
  // Test mode always runs on the sandbox; live mode on the configured driver. Every platform call
  // passes the router's guard: none may be made with a database transaction open.
  const sandbox = new SandboxPlatform({
    db: sandboxDb,
    delayMs: options.sandboxDelayMs,
    addressRanges: options.sandboxAddressRanges,
    callMs: options.sandboxCallMs,
  });
  const metrics = new ServerMetrics(logger, clock);
  const platform = platformRouter({ live: options.livePlatform?.(sandbox) ?? sandbox, test: sandbox }, metrics);
  const guard = new DestinationGuard(options.webhookResolver);
  const sender = new WebhookSender({ guard, extraCa: options.webhookCa, logger, idleSocketsPerReceiver: options.webhookConcurrency });
  const webhooks = new WebhookService({ db, clock, cursors, guard, sender, secrets: webhookSecrets, logger: options.logger });
  // Every event is recorded here; the webhooks module queues its delivery in the same transaction.
  const events = new EventService({ db, cursors, recorded: (trx, event) => webhooks.eventRecorded(wholeDatabase(trx), event) });
  const engine = new OperationEngine({
    db,
    clock,
    logger,
    concurrency: options.engineConcurrency ?? (embedded ? 1 : 8),
    exclusive: embedded,
    recordEvent: (trx, event) => events.record(wholeDatabase(trx), event),
    metrics,
  });
  const onOperationOpened = () => engine.kick();
  // Console access ends with the person, the customer's or the partner's suspension, in the
  // statement or transaction that makes the change; the console module is built last, so the
  // person's and the partner's call it late (a customer's is its store's statement parts).
  let consoleAccess: ConsoleService | undefined;
  const console = () => consoleAccess as ConsoleService;
  const customers = new CustomerService({
    db,
    clock,
    cursors,
    platform,
    partnerCache,
    onOperationOpened,
    provisioningMs: options.sandboxDelayMs,
    revokeConsoleAccess: (trx, uid) => console().revokeCustomer(wholeDatabase(trx), uid),
    events,
  });
  const customerOfProjectsAndUsers = customerAccess(customers);
  const projects = new ProjectService({ db, cursors, customers: customerOfProjectsAndUsers, onOperationOpened });
  const users = new UserService({
    db,
    clock,
    logger,
    cursors,
    platform,
    customers: customerOfProjectsAndUsers,
    onUserRemoved: (trx, uid) => console().revokeUser(wholeDatabase(trx), uid),
  });
  consoleAccess = new ConsoleService({ db, clock, platform, customers, users, projects, partnerCache, publicUrl: options.publicUrl });
  // The provisioning steps, registered with the generic engine by the modules they belong to.
  const stepDeps = { db, clock, logger, platform, users, partnerCache };
  registerCustomerSteps(engine, stepDeps);
  registerProjectSteps(engine, { db, platform, customers: customerOfProjectsAndUsers });
  engine.addSweep(() => users.reconcile());
  const images = new OsImageCatalogue({ source: options.osImagesSource ?? bundledSource(), clock, logger: options.logger });
  const operations = new OperationService({ db, cursors, customers, engine });
  metrics.readFrom({
    database: async () => {
      // One after the other: a scrape holds at most one of the pool's connections.
      const open = await operations.openSummary();
      const receiversFailing = await webhooks.failingReceivers();
      const oldestOpenSeconds = open.oldestLive ? Math.max(0, (clock.nowMs() - open.oldestLive.getTime()) / 1000) : null;
      return { operationsOpen: open.byType, oldestOpenSeconds, receiversFailing };
    },
    poolWaiting: () => database.poolWaiting(),
  });
  return {
    options,
    cursors,
    partnerCache,
    partners: new PartnerService({
      db,
      clock,
      cursors,
      cache: partnerCache,
      setupMs: Math.round(options.sandboxDelayMs / 3),
      onPartnerSuspended: (trx, id) => console().revokePartner(wholeDatabase(trx), id),
    }),
    keys: new KeyService(db, clock, keyCache, keyUsage),
    keyUsage,
    auth: new AuthService({
      db,
      clock,
      tokens: new AccessTokenCodec(secrets.tokenSigningKey),
      partners: partnerCache,
      keys: keyCache,
      keyUsage,
      rateLimiter,
      attempts: createLocalRateLimiter(clock),
    }),
    platform,
    sandbox,
    engine,
    customers,
    projects,
    users,
    operations,
    console: consoleAccess,
    consoleSessions: new ConsoleSessionCache({ console: consoleAccess, clock, ttlMs: options.partnerCacheMs }),
    vms: new ConsoleVmService({ db, clock, platform, images, partnerCache }),
    images,
    testHelpers: new TestHelperService({ db, clock, sandbox, customers, engine, partnerCache }),
    events,
    eventStreams: new EventStreams({ db, logger: options.logger, options: options.eventStreams }),
    webhooks,
    dispatcher: new WebhookDispatcher({
      db,
      clock,
      logger: options.logger,
      sender,
      secrets: webhookSecrets,
      embedded,
      perReceiver: options.webhookConcurrency,
      metrics,
    }),
    webhookSender: sender,
    capacity: new CapacityService({ db, clock, cursors }),
    quotas: new QuotaService({
      db,
      platform,
      customers: {
        find: async (tenant, id) => quotaCustomer(await customers.find(tenant, id)),
        lock: async (trx, tenant, id) => quotaCustomer(await customers.lock(wholeDatabase(trx), tenant, id)),
        touch: (trx, uid, at) => customers.touch(wholeDatabase(trx), uid, at),
      },
      retryAfterS: customers.retryAfterS,
      changed: onOperationOpened,
      events,
    }),
    usage: new UsageService({ db, cursors, platform }),
    metrics,
  };
}

/** A customer as a quota change needs it (capacity knows customers only through this). */
function quotaCustomer(row: CustomerRow | undefined): QuotaCustomer | undefined {
  return row && { uid: row.uid, id: row.id, status: row.status, organization: organizationRef(row) };
}
