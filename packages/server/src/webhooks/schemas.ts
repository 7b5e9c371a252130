import { type Static, Type } from 'typebox';
import { Text } from '../infra/request-schemas.ts';
import { WEBHOOK_URL_MAX_LENGTH } from './destination.ts';
import { NAMEABLE_EVENTS } from './event-filter.ts';
import type { WebhookAttemptsTable, WebhooksTable } from './tables.ts';

const Timestamp = Type.String({ format: 'date-time' });

/** `PUT /webhook`: the whole configuration (omitted fields take their defaults). */
export const PutWebhookRequest = Type.Object(
  {
    url: Text({
      minLength: 1,
      maxLength: WEBHOOK_URL_MAX_LENGTH,
      description: 'HTTPS URL on a public host, no credentials.',
      examples: ['https://hooks.example.com/tenantry'],
    }),
    events: Type.Optional(
      Type.Array(Type.Enum(NAMEABLE_EVENTS), {
        maxItems: 50,
        description:
          'Event names, families such as `customer.*`, or `*` (default). An empty list means every event. `ping` cannot be named: `*` covers it.',
      }),
    ),
    enabled: Type.Optional(Type.Boolean({ description: 'Default true; false stops delivery.' })),
  },
  { title: 'PutWebhookRequest', additionalProperties: false },
);
export type PutWebhookRequest = Static<typeof PutWebhookRequest>;

/** partner-api.md, Webhook configuration. */
export const WebhookConfig = Type.Object(
  {
    url: Type.String(),
    events: Type.Array(Type.String()),
    enabled: Type.Boolean(),
    signing_secret_configured: Type.Literal(true),
    /** Only in the answer of the PUT that created the secret (and its idempotent replays). */
    signing_secret: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$' })),
    previous_secret_valid_until: Type.Union([Timestamp, Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { title: 'Webhook' },
);
export type WebhookConfig = Static<typeof WebhookConfig>;

export function toWebhookConfig(row: WebhooksTable, now: Date): WebhookConfig {
  const previous = row.previous_secret_valid_until;
  return {
    url: row.url,
    events: row.events,
    enabled: row.enabled,
    signing_secret_configured: true,
    previous_secret_valid_until: previous && previous > now ? previous.toISOString() : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export const DeleteWebhookResult = Type.Object({ deleted: Type.Literal(true) }, { title: 'DeleteWebhookResult' });

export const SecretRotation = Type.Object(
  {
    signing_secret: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    previous_secret_valid_until: Timestamp,
  },
  { title: 'SecretRotation' },
);
export type SecretRotation = Static<typeof SecretRotation>;

/** `POST /webhook/test`. */
export const TestDeliveryResult = Type.Object(
  {
    delivered: Type.Boolean(),
    delivery_id: Type.String(),
    attempts: Type.Integer(),
    status: Type.Union([Type.Integer(), Type.Null()]),
    error: Type.Union([Type.String(), Type.Null()]),
  },
  { title: 'TestDeliveryResult' },
);
export type TestDeliveryResult = Static<typeof TestDeliveryResult>;

/** partner-api.md, Delivery record: one attempt; `attempts` is that attempt's number. */
export const DeliveryRecord = Type.Object(
  {
    id: Type.String(),
    event: Type.String(),
    delivered: Type.Boolean(),
    attempts: Type.Integer(),
    status: Type.Union([Type.Integer(), Type.Null()]),
    error: Type.Union([Type.String(), Type.Null()]),
    at: Timestamp,
  },
  { title: 'WebhookDelivery' },
);
export type DeliveryRecord = Static<typeof DeliveryRecord>;

export function toDeliveryRecord(row: Omit<WebhookAttemptsTable, 'seq'>): DeliveryRecord {
  return {
    id: row.delivery_id,
    event: row.event,
    delivered: row.delivered,
    attempts: row.attempt,
    status: row.status,
    error: row.error,
    at: row.at.toISOString(),
  };
}
