import { sql } from 'kysely';
import type { Logger } from 'pino';
import { serializeEventBody } from '../events/schemas.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import type { DeliveryResult } from '../infra/metrics/metrics.ts';
import type { KeyMode } from '../infra/mode.ts';
import { Poller } from '../infra/poller.ts';
import { type SpanHandle, tracing } from '../infra/telemetry/tracing.ts';
import { DELIVERY_STATE } from './delivery-state.ts';
import { filterMatches } from './event-filter.ts';
import type { WebhookSecrets } from './secrets.ts';
import type { AttemptResult, WebhookSender } from './sender.ts';
import { deliveryHeaders } from './service.ts';
import { signDelivery } from './signature.ts';
import { appendAttempts, type DeliveryTarget, type NewAttempt } from './store.ts';
import type { DeliveryState, WebhookTables } from './tables.ts';

type DispatcherDb = Db<WebhookTables>;

/** partner-api.md, Receiver response and retry rules: 5 attempts, retried after 1, 2, 8 and 60 seconds. */
export const RETRY_DELAYS_MS = [1_000, 2_000, 8_000, 60_000] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
/** A process sends a claimed delivery within this (the 5 s timeout and then some); after a crash another takes it over. */
const LEASE_MS = 15_000;
/**
 * Outcomes are written as soon as the previous write is done, all that arrived meanwhile in one
 * transaction (a group commit): a write never waits for a timer, and a burst still makes few writes.
 */
const FLUSH_DELAY_MS = 0;
/** How long after a commit that recorded events the dispatcher claims them (events close together share a pass). */
const WAKE_DELAY_MS = 5;

export interface DispatcherDeps {
  db: DispatcherDb;
  clock: Clock;
  logger: Logger;
  sender: WebhookSender;
  secrets: WebhookSecrets;
  /** The embedded database has one process, so leases left by a killed one can be cleared at start. */
  embedded: boolean;
  /** Deliveries in flight in this process (default: 8 receivers' worth). */
  maxInFlight?: number;
  /**
   * Deliveries in flight to one receiver across every process, so a receiver that stops answering
   * holds only these (TENANTRY_WEBHOOK_CONCURRENCY).
   */
  perReceiver: number;
  /** Counts attempts by result and times live-mode events to their first attempt (the process's metrics). */
  metrics?: { webhookAttempt(result: DeliveryResult, count?: number): void; webhookFirstAttempt(seconds: number): void };
}

interface ClaimedRow {
  id: string;
  partner_id: string;
  mode: KeyMode;
  type: string;
  data: unknown;
  created_at: Date;
  attempts: number;
  signed_at: string | number | null;
  signature: string | null;
  trace_parent: string | null;
  /** The delivery's receiver as the claim found it; null when its partner has none (its deliveries are skipped). */
  target: DeliveryTarget | null;
}

interface Outcome {
  row: ClaimedRow;
  state: DeliveryState;
  dueAt: Date | null;
  attempt: NewAttempt;
}

/**
 * Delivers the queued deliveries (`webhook_deliveries`, one per event a receiver wanted when it was
 * recorded); a pass claims the due ones with a lease (a conditional update, so processes sharing a
 * database never claim one twice), decides from the receiver's configuration whether it is still wanted, signs it once (the first attempt fixes
 * the timestamp and signature that every retry reuses) and sends it outside any transaction.
 * Outcomes are written in batches: the delivery's next state and the attempt in the log.
 */
export class WebhookDispatcher {
  readonly #deps: DispatcherDeps;
  readonly #maxInFlight: number;
  readonly #perReceiver: number;
  readonly #sending = new Set<Promise<void>>();
  /** Passes under way: the rows a pass claimed become sends only at its end. */
  readonly #passes = new Set<Promise<number>>();
  #outcomes: Outcome[] = [];
  #flushing: Promise<void> | undefined;
  #flushTimer: NodeJS.Timeout | undefined;
  readonly #poller: Poller;

  constructor(deps: DispatcherDeps) {
    this.#deps = deps;
    this.#perReceiver = deps.perReceiver;
    this.#maxInFlight = deps.maxInFlight ?? 8 * this.#perReceiver;
    // A pass that filled every free slot may have left more waiting: run again at once.
    this.#poller = new Poller(
      'webhook dispatcher',
      async () => (await this.runDue()) > 0 && this.#sending.size < this.#maxInFlight,
      deps.logger,
    );
  }

  async start(pollMs = 1_000): Promise<void> {
    if (this.#deps.embedded) {
      await this.#deps.db
        .updateTable('webhook_deliveries')
        .set({ lease_until: null })
        .where('state', '=', 'pending')
        .where('lease_until', 'is not', null)
        .execute();
    }
    this.#poller.start(pollMs);
  }

  /** Asks for a pass as soon as possible. */
  kick(): void {
    this.#poller.kick();
  }

  /**
   * New events were committed: a pass comes in a few milliseconds, so events committed close
   * together are claimed by one pass (the interval is only the safety net for other processes' events).
   */
  eventsRecorded(): void {
    this.#poller.wakeIn(WAKE_DELAY_MS);
  }

  /** Stops claiming, lets deliveries in flight finish (at most their timeout) and records them. */
  async stop(): Promise<void> {
    await this.#poller.stop();
    // A pass started outside the poller (a test's, a drain's) still turns its claims into sends.
    await Promise.all(this.#passes);
    await Promise.all(this.#sending);
    await this.flush();
  }

  /** One pass: claims due deliveries for the free slots and starts sending them. How many it claimed. */
  async runDue(): Promise<number> {
    const pass = this.#pass();
    this.#passes.add(pass);
    try {
      return await pass;
    } finally {
      this.#passes.delete(pass);
    }
  }

  async #pass(): Promise<number> {
    const { db, clock } = this.#deps;
    const free = this.#maxInFlight - this.#sending.size;
    if (free <= 0) return 0;
    const now = clock.now();
    const claimed = await claim(db, now, new Date(now.getTime() + LEASE_MS), free, this.#perReceiver);
    if (claimed.length === 0) return 0;

    const unwanted: string[] = [];
    const signatures: { id: string; signedAt: number; signature: string }[] = [];
    const sends: { row: ClaimedRow; target: DeliveryTarget; body: string }[] = [];
    for (const row of claimed) {
      const target = row.target;
      if (!target?.enabled || !filterMatches(target.events, row.type)) {
        unwanted.push(row.id);
        continue;
      }
      const body = serializeEventBody(row);
      if (row.signature === null) {
        const signedAt = Math.floor(now.getTime() / 1000);
        row.signed_at = signedAt;
        row.signature = signDelivery(this.#deps.secrets.open(target), signedAt, body);
        signatures.push({ id: row.id, signedAt, signature: row.signature });
      }
      sends.push({ row, target, body });
    }
    if (unwanted.length > 0) {
      await db
        .updateTable('webhook_deliveries')
        .set({ state: DELIVERY_STATE.move('pending', 'skipped'), lease_until: null })
        .where('id', '=', sql<string>`any(${unwanted}::text[])`)
        .where('state', '=', 'pending')
        .execute();
      this.#deps.metrics?.webhookAttempt('skipped', unwanted.length);
    }
    // The signature is stored before the first send, so a retry after a crash sends the same one.
    if (signatures.length > 0) {
      await sql`
        update webhook_deliveries d set signed_at = v.signed_at, signature = v.signature
        from unnest(${signatures.map((s) => s.id)}::text[], ${signatures.map((s) => s.signedAt)}::bigint[],
          ${signatures.map((s) => s.signature)}::text[]) as v (id, signed_at, signature)
        where d.id = v.id and d.signature is null`.execute(db);
    }
    for (const send of sends) {
      const sending = this.#send(send.row, send.target, send.body).finally(() => {
        this.#sending.delete(sending);
      });
      this.#sending.add(sending);
    }
    return claimed.length;
  }

  /**
   * Attempts everything due now and waits until every attempt in flight (the background loop's
   * included) has its outcome recorded. Tests drive the dispatcher with it, so that "nothing was sent"
   * is proven by a pass that ran, not by a pause.
   */
  async drain(): Promise<void> {
    for (let i = 0; i < 1_000; i++) {
      const claimed = await this.runDue();
      await Promise.all(this.#passes);
      await Promise.all(this.#sending);
      await this.flush();
      if (claimed === 0 && this.#sending.size === 0 && this.#passes.size === 0) return;
    }
  }

  /** Writes the outcomes collected so far (one transaction for all of them). */
  async flush(): Promise<void> {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    while (this.#flushing) await this.#flushing;
    const outcomes = this.#outcomes;
    if (outcomes.length === 0) return;
    this.#outcomes = [];
    this.#flushing = this.#write(outcomes).finally(() => {
      this.#flushing = undefined;
    });
    await this.#flushing;
    // Their leases are released: the receivers have room for what waits.
    this.kick();
  }

  /** An attempt, in a span of its own linked to what recorded the event (when traces are on). */
  #send(row: ClaimedRow, target: DeliveryTarget, body: string): Promise<void> {
    const { clock, metrics } = this.#deps;
    if (row.attempts === 0 && row.mode === 'live') metrics?.webhookFirstAttempt((clock.nowMs() - row.created_at.getTime()) / 1000);
    const traces = tracing();
    if (!traces.enabled) return this.#attempt(row, target, body, undefined);
    const attributes = { 'tenantry.delivery.id': row.id, 'tenantry.event.type': row.type, 'tenantry.partner_id': row.partner_id };
    return traces.linked('webhook delivery', row.trace_parent, attributes, (span) => this.#attempt(row, target, body, span));
  }

  async #attempt(row: ClaimedRow, target: DeliveryTarget, body: string, span: SpanHandle | undefined): Promise<void> {
    const { sender, clock, logger } = this.#deps;
    let result: AttemptResult;
    try {
      result = await sender.send({
        url: target.url,
        allowPrivate: target.allow_private_webhooks,
        body,
        headers: deliveryHeaders(row.id, row.type, Number(row.signed_at), row.signature ?? ''),
      });
    } catch (err) {
      logger.error({ err, delivery_id: row.id }, 'webhook delivery failed unexpectedly');
      result = { delivered: false, status: null, error: 'delivery failed unexpectedly', retry: true };
    }
    const now = clock.now();
    const attempt = row.attempts + 1;
    const again = !result.delivered && result.retry && attempt < MAX_ATTEMPTS;
    const state = DELIVERY_STATE.move('pending', result.delivered ? 'delivered' : again ? 'pending' : 'failed');
    const delay = RETRY_DELAYS_MS[attempt - 1] ?? 0;
    this.#deps.metrics?.webhookAttempt(state === 'pending' ? 'retrying' : state === 'delivered' ? 'delivered' : 'failed');
    span?.set({ 'tenantry.delivery.attempt': attempt, 'http.response.status_code': result.status ?? undefined });
    if (!result.delivered) span?.fail(result.error ?? 'not delivered');
    this.#outcomes.push({
      row,
      state,
      dueAt: again ? new Date(now.getTime() + delay) : null,
      attempt: {
        partner_id: row.partner_id,
        mode: row.mode,
        delivery_id: row.id,
        event: row.type,
        delivered: result.delivered,
        attempt,
        status: result.status,
        error: result.error,
        at: now,
      },
    });
    if (state === 'failed') {
      logger.info({ delivery_id: row.id, partner: row.partner_id, attempts: attempt, error: result.error }, 'webhook delivery dropped');
    }
    // The retry's time is known: a pass comes then, not at the next interval.
    if (again) this.#poller.wakeIn(delay);
    // Outcomes finishing close together are written together.
    this.#flushTimer ??= setTimeout(() => {
      this.flush().catch((err: unknown) => logger.warn({ err }, 'recording webhook outcomes failed; their leases will expire'));
    }, FLUSH_DELAY_MS);
  }

  /** The outcomes' attempts and next states, in one statement. */
  async #write(outcomes: Outcome[]): Promise<void> {
    await appendAttempts(
      this.#deps.db,
      outcomes.map((o) => o.attempt),
      outcomes.map((o) => ({ id: o.row.id, state: o.state, attempts: o.attempt.attempt, dueAt: o.dueAt })),
    );
  }
}

/**
 * Claims due deliveries, each with its receiver as the same snapshot sees it (one round trip for both):
 * at most `free` in all, and per receiver (partner and mode) no more than `perReceiver`
 * in flight across every process, so one partner's backlog or dead receiver never takes another's turn.
 * Only configured receivers can have pending deliveries (`queueDelivery`), so the walk is one
 * index probe per receiver. The update takes the picked rows by their place in
 * the table (`ctid`, a TID scan: a few pages whatever the backlog; joined by id, the planner hashes every
 * pending delivery to find them), and re-checks the state and the lease on the row's newest
 * version: of two processes only one claims a row.
 */
async function claim(db: DispatcherDb, now: Date, leaseUntil: Date, free: number, perReceiver: number): Promise<ClaimedRow[]> {
  const result = await sql<ClaimedRow>`
    with due as materialized (
      select due.ctid from webhooks w
      cross join lateral (
        select d.ctid from webhook_deliveries d
        where d.partner_id = w.partner_id and d.mode = w.mode and d.state = 'pending'
          and (d.due_at is null or d.due_at <= ${now})
          and (d.lease_until is null or d.lease_until <= ${now})
        order by d.due_at nulls first, d.id
        limit greatest(0, ${perReceiver}::integer - (
          select count(*) from webhook_deliveries b
          where b.partner_id = w.partner_id and b.mode = w.mode and b.state = 'pending'
            and b.lease_until is not null and b.lease_until > ${now}))
      ) as due
      limit ${free})
    , claimed as (
      update webhook_deliveries d set lease_until = ${leaseUntil}
      where d.ctid = any(array(select ctid from due))
        and d.state = 'pending' and (d.lease_until is null or d.lease_until <= ${now})
      returning d.id, d.partner_id, d.mode, d.type, d.data, d.created_at, d.attempts, d.signed_at, d.signature, d.trace_parent)
    select c.*, case when w.partner_id is null then null else json_build_object('partner_id', w.partner_id,
        'mode', w.mode, 'url', w.url, 'events', w.events, 'enabled', w.enabled, 'secret', w.secret,
        'allow_private_webhooks', p.allow_private_webhooks) end as target
    from claimed c
    left join webhooks w on w.partner_id = c.partner_id and w.mode = c.mode
    left join partners p on p.id = c.partner_id`.execute(db);
  return result.rows;
}
