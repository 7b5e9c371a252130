import type { Logger } from 'pino';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Clock } from '../clock.ts';
import { RequestStats } from './requests.ts';

/** What the database-wide gauges read at a scrape (one short query per module that owns the rows). */
export interface DatabaseGauges {
  /** Open operations (pending or running) of both modes, by type. */
  operationsOpen: { type: string; open: number }[];
  /** Seconds since the oldest open live-mode operation was created; null when none is open. */
  oldestOpenSeconds: number | null;
  /** Enabled receivers whose newest delivery attempt failed. */
  receiversFailing: number;
}

/** Where the gauges that are not counted as things happen come from, given by the composition root. */
export interface MetricsSources {
  database(): Promise<DatabaseGauges>;
  /** Requests and background work waiting for a connection of this process's pool now. */
  poolWaiting(): number;
}

/** How the engine's, the platform's and the dispatcher's results are named in labels. */
export type StepResult = 'done' | 'in_progress' | 'failed' | 'unavailable';
export type PlatformCallResult = 'ok' | 'failed' | 'unavailable' | 'error';
export type DeliveryResult = 'delivered' | 'retrying' | 'failed' | 'skipped';

/**
 * A scrape within this long of the previous one answers the database-wide gauges it read: several
 * Prometheus servers scraping every process cost a few queries a minute, not one each.
 */
const DATABASE_GAUGES_TTL_MS = 5_000;

const PLATFORM_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const LAG_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * This process's metrics in Prometheus' text format (`GET /metrics` on the operator listener), through
 * prom-client with its default process metrics. Counters and histograms move as things happen; the
 * gauges of database-wide state are read at a scrape (`MetricsSources`), never per request. No label
 * carries a partner's or a customer's id: routes are their patterns, results are fixed words.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly #logger: Logger;
  readonly #clock: Clock;
  #sources: MetricsSources | undefined;
  #databaseRead: { atMs: number; gauges: Promise<DatabaseGauges | undefined> } | undefined;
  readonly #requests = new RequestStats(this.registry);

  readonly #rateLimited = new Counter({
    name: 'tenantry_rate_limited_total',
    help: 'Requests answered 429 RATE_LIMITED (partner rate limit, token exchanges, event streams), by listener',
    labelNames: ['api'] as const,
    registers: [this.registry],
  });
  readonly #steps = new Counter({
    name: 'tenantry_operation_steps_total',
    help: "Looks the operation engine took at operations, by operation type and the look's outcome",
    labelNames: ['type', 'result'] as const,
    registers: [this.registry],
  });
  readonly #platformCalls = new Counter({
    name: 'tenantry_platform_calls_total',
    help: 'Calls of the platform driver, by driver, call and result',
    labelNames: ['platform', 'call', 'result'] as const,
    registers: [this.registry],
  });
  readonly #platformDuration = new Histogram({
    name: 'tenantry_platform_call_duration_seconds',
    help: 'How long platform calls took, by driver and call',
    labelNames: ['platform', 'call'] as const,
    buckets: PLATFORM_BUCKETS,
    registers: [this.registry],
  });
  readonly #deliveries = new Counter({
    name: 'tenantry_webhook_deliveries_total',
    help: 'Webhook delivery attempts by result (retrying: failed, another follows; failed: the last one failed; skipped: no longer wanted, not sent)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly #webhookLag = new Histogram({
    name: 'tenantry_webhook_lag_seconds',
    help: "Time from a live-mode event to its delivery's first attempt",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });

  constructor(logger: Logger, clock: Clock) {
    this.#logger = logger;
    this.#clock = clock;
    collectDefaultMetrics({ register: this.registry });
    // Read before the database gauges' queries start, which would be counted waiting for a connection.
    const sources = () => this.#sources;
    new Gauge({
      name: 'tenantry_database_pool_waiting',
      help: "Requests and background work of this process waiting for one of its pool's database connections",
      registers: [this.registry],
      collect() {
        this.set(sources()?.poolWaiting() ?? 0);
      },
    });
    const database = () => this.#databaseGauges();
    const typesSeen = new Set<string>();
    new Gauge({
      name: 'tenantry_operations_open',
      help: 'Open operations (pending or running) in the database, both modes, by type; the same from every process',
      labelNames: ['type'] as const,
      registers: [this.registry],
      async collect() {
        const gauges = await database();
        this.reset();
        if (!gauges) return;
        // A type once seen drops to 0 rather than vanishing when its last operation ends.
        for (const type of typesSeen) this.set({ type }, 0);
        for (const { type, open } of gauges.operationsOpen) {
          typesSeen.add(type);
          this.set({ type }, open);
        }
      },
    });
    new Gauge({
      name: 'tenantry_operation_oldest_open_seconds',
      help: 'Age of the oldest open live-mode operation (0 when none is open); the same from every process',
      registers: [this.registry],
      async collect() {
        const gauges = await database();
        this.set(gauges ? (gauges.oldestOpenSeconds ?? 0) : Number.NaN);
      },
    });
    new Gauge({
      name: 'tenantry_webhook_receivers_failing',
      help: 'Enabled webhook receivers whose newest delivery attempt failed; the same from every process',
      registers: [this.registry],
      async collect() {
        const gauges = await database();
        this.set(gauges ? gauges.receiversFailing : Number.NaN);
      },
    });
  }

  /** The sources of the gauges read at a scrape (the services exist after this object). */
  readFrom(sources: MetricsSources): void {
    this.#sources = sources;
  }

  /** The exposition, and its content type. */
  async scrape(): Promise<{ text: string; contentType: string }> {
    return { text: await this.registry.metrics(), contentType: this.registry.contentType };
  }

  /** A request answered: `route` is the pattern it matched (undefined: none, and never the path asked for). */
  request(api: string, method: string, route: string | undefined, status: number, elapsedMs: number): void {
    this.#requests.record(api, method, route ?? 'unmatched', status, elapsedMs);
    if (status === 429) this.#rateLimited.inc({ api });
  }

  operationStep(type: string, result: StepResult): void {
    this.#steps.inc({ type, result });
  }

  platformCall(platform: string, call: string, result: PlatformCallResult, elapsedMs: number): void {
    this.#platformCalls.inc({ platform, call, result });
    this.#platformDuration.observe({ platform, call }, elapsedMs / 1000);
  }

  /** `count` deliveries came to `result` (skipped: no longer wanted when claimed, nothing sent). */
  webhookAttempt(result: DeliveryResult, count = 1): void {
    this.#deliveries.inc({ result }, count);
  }

  /** A live-mode delivery's first attempt, `seconds` after its event. */
  webhookFirstAttempt(seconds: number): void {
    this.#webhookLag.observe(Math.max(0, seconds));
  }

  /** The database gauges: read once for every gauge of a scrape, and again only after the TTL. */
  #databaseGauges(): Promise<DatabaseGauges | undefined> {
    const sources = this.#sources;
    if (!sources) return Promise.resolve(undefined);
    const nowMs = this.#clock.nowMs();
    const read = this.#databaseRead;
    if (read && nowMs >= read.atMs && nowMs - read.atMs < DATABASE_GAUGES_TTL_MS) return read.gauges;
    const gauges = sources.database().catch((err: unknown) => {
      // Unknown in this scrape rather than stale: no operations by type, NaN for the others.
      this.#logger.warn({ err }, 'metrics: the database gauges could not be read');
      this.#databaseRead = undefined;
      return undefined;
    });
    this.#databaseRead = { atMs: nowMs, gauges };
    return gauges;
  }
}
