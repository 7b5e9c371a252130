import type { Logger } from 'pino';
import { requestTenant, type Tenant } from '../auth/tenant.ts';
import type { EventData, RecordedEvent } from '../events/payloads.ts';
import { EVENT_RETENTION_MS } from '../events/service.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { afterCommit } from '../infra/db/transactions.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import { answerWith } from '../infra/idempotency/answer.ts';
import type { IdempotentReplay } from '../infra/idempotency/plugin.ts';
import type { IdempotencyTables } from '../infra/idempotency/tables.ts';
import { newId } from '../infra/ids.ts';
import { type CursorCodec, type Page, toPage } from '../infra/pagination/cursor.ts';
import { DELIVERY_STATE } from './delivery-state.ts';
import type { DestinationGuard } from './destination.ts';
import { urlShapeProblem } from './destination.ts';
import {
  type DeliveryRecord,
  type PutWebhookRequest,
  type SecretRotation,
  type TestDeliveryResult,
  toDeliveryRecord,
  toWebhookConfig,
  type WebhookConfig,
} from './schemas.ts';
import { secretFingerprint, type WebhookSecrets } from './secrets.ts';
import type { WebhookSender } from './sender.ts';
import { newSigningSecret, signDelivery } from './signature.ts';
import { appendAttempts, countFailingReceivers, findWebhook, queueDelivery } from './store.ts';
import type { WebhookTables } from './tables.ts';

/** The webhook service also writes idempotent answers. */
type WebhookServiceDb = Db<WebhookTables & IdempotencyTables>;

/** How long `previous_secret_valid_until` says retries signed with the old secret may still arrive. */
export const PREVIOUS_SECRET_GRACE_MS = 5 * 60 * 1000;

const notConfigured = () => new ApiError('NOT_CONFIGURED', 'No webhook is configured: PUT /webhook first.');

export interface WebhookServiceDeps {
  db: WebhookServiceDb;
  clock: Clock;
  cursors: CursorCodec;
  guard: DestinationGuard;
  sender: WebhookSender;
  secrets: WebhookSecrets;
  logger: Logger;
}

/** partner-api.md, Webhook configuration and the webhook endpoints. */
export class WebhookService {
  readonly #deps: WebhookServiceDeps;
  readonly #queuedListeners = new Set<() => void>();

  constructor(deps: WebhookServiceDeps) {
    this.#deps = deps;
  }

  /**
   * Queues the delivery of an event, in the transaction that records it, when the partner's receiver
   * wants it; once that transaction commits, the listeners hear of it (the dispatcher wakes on it
   * instead of polling). An event no receiver wants queues nothing and wakes nobody.
   */
  async eventRecorded(trx: Db<WebhookTables>, event: RecordedEvent): Promise<void> {
    // After the insert: outside a transaction, the row is already there when the listeners hear of it.
    if (await queueDelivery(trx, event)) afterCommit(this.#announceQueued);
  }

  /** One function for every transaction, so a transaction that queues several deliveries announces them once. */
  readonly #announceQueued = () => {
    for (const listener of this.#queuedListeners) listener();
  };

  /** Calls `listener` after each commit that queued deliveries. Returns the function that stops the calls. */
  onQueued(listener: () => void): () => void {
    this.#queuedListeners.add(listener);
    return () => this.#queuedListeners.delete(listener);
  }

  /** Enabled receivers whose newest delivery attempt failed (the metrics' gauge). */
  failingReceivers(): Promise<number> {
    return countFailingReceivers(this.#deps.db);
  }

  /** Drops finished deliveries as old as the events they carried. */
  async deleteExpired(now: Date): Promise<void> {
    await this.#deps.db
      .deleteFrom('webhook_deliveries')
      .where('created_at', '<', new Date(now.getTime() - EVENT_RETENTION_MS))
      .where('state', '!=', 'pending')
      .execute();
  }

  async put(tenant: Tenant, request: PutWebhookRequest): Promise<WebhookConfig> {
    const { db, guard } = this.#deps;
    const events = [...new Set(request.events ?? ['*'])];
    checkRequest(request.url);
    // The URL is re-checked before every delivery too: DNS may change after this.
    const destination = await guard.check(new URL(request.url), tenant.partner.allow_private_webhooks);
    if (!destination.ok) {
      // What the host resolved to stays in the server log: a partner must not map internal names.
      this.#deps.logger.info({ partner: tenant.partnerId, url: request.url, detail: destination.detail }, 'webhook destination refused');
      throw validationError([{ in: 'body', field: 'url', message: destination.reason }]);
    }

    return db.transaction().execute(async (trx) => {
      const existing = await trx
        .selectFrom('webhooks')
        .select('partner_id')
        .where('partner_id', '=', tenant.partnerId)
        .where('mode', '=', tenant.mode)
        .forUpdate()
        .executeTakeFirst();
      const settings = { url: request.url, events, enabled: request.enabled ?? true, updated_at: tenant.now };
      if (existing) {
        const row = await trx
          .updateTable('webhooks')
          .set(settings)
          .where('partner_id', '=', tenant.partnerId)
          .where('mode', '=', tenant.mode)
          .returningAll()
          .executeTakeFirstOrThrow();
        return answerWith(trx, toWebhookConfig(row, tenant.now));
      }
      const secret = newSigningSecret();
      const row = await trx
        .insertInto('webhooks')
        .values({
          partner_id: tenant.partnerId,
          mode: tenant.mode,
          ...settings,
          secret: this.#deps.secrets.seal(tenant.partnerId, tenant.mode, secret),
          previous_secret_valid_until: null,
          created_at: tenant.now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      // Returned once; an idempotent replay of this PUT carries it again for 24 hours.
      return answerWith(trx, { ...toWebhookConfig(row, tenant.now), signing_secret: secret });
    });
  }

  /**
   * An idempotent replay of the creating PUT (partner-api.md, Conventions rule 1) hands the secret
   * back only while it is still the current one; after a rotation or removal it is revoked, and the
   * replay answers without it. The secret is never kept in the stored answer: only its fingerprint is.
   */
  readonly replay: IdempotentReplay = this.#secretReplay((data) => {
    const { [SECRET_HASH_FIELD]: _revoked, ...rest } = data;
    return rest;
  });

  /**
   * A rotation's answer is its new secret: a replay after that secret was itself replaced or removed
   * has nothing true to hand back, so it is refused rather than answered without the secret.
   */
  readonly rotationReplay: IdempotentReplay = this.#secretReplay(() => {
    throw new ApiError(
      'CONFLICT',
      'The secret this rotation returned has since been replaced or removed. Rotate again with a new Idempotency-Key.',
    );
  });

  #secretReplay(revoked: (data: Record<string, unknown>) => Record<string, unknown>): IdempotentReplay {
    return {
      store: (body) => mapSecretField(body, (data) => renameKey(data, 'signing_secret', SECRET_HASH_FIELD, secretFingerprint)),
      replay: async (request, stored) => {
        const tenant = requestTenant(request, this.#deps.clock);
        const row = await findWebhook(this.#deps.db, tenant.partnerId, tenant.mode);
        const current = row ? this.#deps.secrets.open(row) : undefined;
        return mapSecretField(stored, (data) => {
          const hash = data[SECRET_HASH_FIELD];
          if (typeof hash !== 'string') return data;
          if (current !== undefined && secretFingerprint(current) === hash)
            return renameKey(data, SECRET_HASH_FIELD, 'signing_secret', () => current);
          return revoked(data);
        });
      },
    };
  }

  async get(tenant: Tenant): Promise<WebhookConfig> {
    const row = await findWebhook(this.#deps.db, tenant.partnerId, tenant.mode);
    if (!row) throw notFound('A webhook configuration');
    return toWebhookConfig(row, tenant.now);
  }

  /** Removes the configuration and its secret; deliveries still pending (retries) are dropped with it. */
  async delete(tenant: Tenant): Promise<{ deleted: true }> {
    return this.#deps.db.transaction().execute(async (trx) => {
      const removed = await trx
        .deleteFrom('webhooks')
        .where('partner_id', '=', tenant.partnerId)
        .where('mode', '=', tenant.mode)
        .executeTakeFirst();
      if (removed.numDeletedRows === 0n) throw notFound('A webhook configuration');
      await trx
        .updateTable('webhook_deliveries')
        .set({ state: DELIVERY_STATE.move('pending', 'skipped'), lease_until: null })
        .where('partner_id', '=', tenant.partnerId)
        .where('mode', '=', tenant.mode)
        .where('state', '=', 'pending')
        .execute();
      return answerWith(trx, { deleted: true as const });
    });
  }

  /** A new secret at once for new deliveries; retries of earlier ones keep their signature. */
  async rotateSecret(tenant: Tenant): Promise<SecretRotation> {
    const secret = newSigningSecret();
    const validUntil = new Date(tenant.now.getTime() + PREVIOUS_SECRET_GRACE_MS);
    return this.#deps.db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('webhooks')
        .set({
          secret: this.#deps.secrets.seal(tenant.partnerId, tenant.mode, secret),
          previous_secret_valid_until: validUntil,
          updated_at: tenant.now,
        })
        .where('partner_id', '=', tenant.partnerId)
        .where('mode', '=', tenant.mode)
        .executeTakeFirst();
      if (updated.numUpdatedRows === 0n) throw notConfigured();
      return answerWith(trx, { signing_secret: secret, previous_secret_valid_until: validUntil.toISOString() });
    });
  }

  /** One `ping`, now: a single attempt, whatever the filter and even while disabled. */
  async test(tenant: Tenant): Promise<TestDeliveryResult> {
    const { db, clock, sender } = this.#deps;
    const webhook = await findWebhook(db, tenant.partnerId, tenant.mode);
    if (!webhook) throw notConfigured();
    const deliveryId = newId('delivery', clock.nowMs());
    const body = JSON.stringify({
      id: deliveryId,
      event: 'ping',
      created_at: tenant.now.toISOString(),
      partner_id: tenant.partnerId,
      data: { message: 'Test delivery from Tenantry: your receiver is reachable.' } satisfies EventData<'ping'>,
    });
    const timestamp = Math.floor(clock.nowMs() / 1000);
    const result = await sender.send({
      url: webhook.url,
      allowPrivate: tenant.partner.allow_private_webhooks,
      body,
      headers: deliveryHeaders(deliveryId, 'ping', timestamp, signDelivery(this.#deps.secrets.open(webhook), timestamp, body)),
    });
    await appendAttempts(db, [
      {
        partner_id: tenant.partnerId,
        mode: tenant.mode,
        delivery_id: deliveryId,
        event: 'ping',
        delivered: result.delivered,
        attempt: 1,
        status: result.status,
        error: result.error,
        at: clock.now(),
      },
    ]);
    return { delivered: result.delivered, delivery_id: deliveryId, attempts: 1, status: result.status, error: result.error };
  }

  async listDeliveries(tenant: Tenant, query: { limit: number; cursor?: string | undefined }): Promise<Page<DeliveryRecord>> {
    const cursors = this.#deps.cursors.scoped(tenant);
    let select = this.#deps.db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('partner_id', '=', tenant.partnerId)
      .where('mode', '=', tenant.mode)
      .orderBy('seq', 'desc')
      .limit(query.limit + 1);
    if (query.cursor !== undefined) {
      const [lastSeq] = cursors.decode(query.cursor, 'webhook-deliveries', {});
      select = select.where('seq', '<', String(lastSeq));
    }
    const rows = await select.execute();
    return toPage(rows, query.limit, toDeliveryRecord, (last) => cursors.encode('webhook-deliveries', {}, [String(last.seq)]));
  }
}

const SECRET_HASH_FIELD = 'signing_secret_sha256';

/** Applies `change` to the `data` of a stored success envelope. */
function mapSecretField(body: string, change: (data: Record<string, unknown>) => Record<string, unknown>): string {
  const envelope = JSON.parse(body) as { data?: Record<string, unknown> };
  if (!envelope.data) return body;
  return JSON.stringify({ ...envelope, data: change(envelope.data) });
}

/** Renames one key in place (the answer keeps its field order), mapping its value. */
function renameKey(data: Record<string, unknown>, from: string, to: string, map: (value: string) => string): Record<string, unknown> {
  if (typeof data[from] !== 'string') return data;
  return Object.fromEntries(Object.entries(data).map(([key, value]) => (key === from ? [to, map(value as string)] : [key, value])));
}

/** The URL's form (the filter's entries are the schema's: `explainFilterEntries`). */
function checkRequest(url: string): void {
  const urlProblem = urlShapeProblem(url);
  if (urlProblem) throw validationError([{ in: 'body', field: 'url', message: urlProblem }]);
}

/** partner-api.md, Delivery: the four `X-Service-*` headers. */
export function deliveryHeaders(deliveryId: string, event: string, timestamp: number, signature: string): Record<string, string> {
  return {
    'x-service-signature': signature,
    'x-service-timestamp': String(timestamp),
    'x-service-event': event,
    'x-service-delivery': deliveryId,
  };
}
