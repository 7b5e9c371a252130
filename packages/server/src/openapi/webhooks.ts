import { type EventName, eventSchemaName } from '../events/payloads.ts';

/**
 * The document's `webhooks` section: one entry per event kind, the POST the partner's receiver gets, and
 * the signature that authenticates it, described as a security scheme of the receiver's (the header it
 * checks).
 */

export const WEBHOOK_SIGNATURE_SCHEME = {
  type: 'apiKey' as const,
  in: 'header',
  name: 'X-Service-Signature',
  description:
    'How a receiver knows a delivery is ours. `X-Service-Signature: sha256=<hex>` is the lowercase hexadecimal HMAC-SHA256 of ' +
    '`<X-Service-Timestamp>.<raw body>`, keyed with the signing secret: its 64 hexadecimal characters as ASCII bytes, not the 32 bytes ' +
    'they encode (`openssl dgst -sha256 -hmac <secret>` gives the same). Compute it over the raw body before any JSON parsing, compare ' +
    'it in constant time, reject a timestamp more than 5 minutes from your clock, and only then parse. After `POST /webhook/secret`, ' +
    "accept either the new or the previous secret for a few minutes. The SDK's `verifyWebhook` does all of this.",
};

/** partner-api.md, Event kinds: when each event is sent. */
const SENT_WHEN: Record<EventName, string> = {
  ping: '`POST /webhook/test` was called. It ignores the `events` filter and works while delivery is disabled.',
  'customer.ready': "A customer's creation succeeded. Carries its first project; no separate `project.ready` is sent for it.",
  'customer.failed': "A customer's creation failed: `error` has the code and message.",
  'customer.suspended': 'A suspension succeeded.',
  'customer.resumed': 'A resume succeeded; `cancelled_scheduled_deletion` tells whether it cancelled a scheduled deletion.',
  'customer.deletion_scheduled': 'A scheduled, recoverable deletion was requested.',
  'customer.deleted': "Teardown removed the customer's organization: minutes after an immediate delete, or when the grace period ran out.",
  'customer.quota_changed': '`PUT /customers/{id}/quota` succeeded.',
  'customer.plan_changed': '`PUT /customers/{id}/plan` succeeded.',
  'project.ready': "A project's creation succeeded.",
  'project.failed': "A project's creation failed.",
  'project.deleted': "A project's deletion was accepted or finished: re-read the project.",
};

const DELIVERY_HEADERS = [
  { name: 'X-Service-Timestamp', description: 'Unix seconds when the delivery was signed; part of what the signature covers.' },
  { name: 'X-Service-Event', description: 'The event name. Not signed: take `event` from the verified body.' },
  {
    name: 'X-Service-Delivery',
    description: "The delivery id (`dlv_...`), equal to the body's `id`. Not signed: deduplicate on the body's `id`.",
  },
];

const DESCRIPTION =
  'Answer 2xx within 5 seconds to acknowledge (also for events you do not handle), and 400 only for a bad signature. 429, 5xx, 3xx, ' +
  'a timeout or a network error is retried after 1, 2, 8 and 60 seconds (5 attempts) with the same id, timestamp and signature; ' +
  "any other 4xx stops the retries. Delivery is at least once and unordered: deduplicate on the body's `id`.";

export function webhooksSection(events: EventName[]): Record<string, unknown> {
  return Object.fromEntries(
    events.map((event) => [
      event,
      {
        post: {
          operationId: `receive${eventSchemaName(event)}`,
          tags: ['Webhooks'],
          summary: `The ${event} event, delivered to the partner's receiver`,
          description: `Sent when: ${SENT_WHEN[event]}\n\n${DESCRIPTION}`,
          security: [{ webhookSignature: [] }],
          parameters: DELIVERY_HEADERS.map(({ name, description }) => ({
            name,
            in: 'header',
            required: true,
            description,
            schema: { type: 'string' },
          })),
          requestBody: {
            required: true,
            description: 'The event body, signed as sent: verify the signature over these exact bytes.',
            content: { 'application/json': { schema: { $ref: `#/components/schemas/${eventSchemaName(event)}` } } },
          },
          responses: {
            '200': { description: 'Any 2xx acknowledges the delivery.' },
            '400': { description: 'The signature did not verify: the delivery is not retried.' },
          },
        },
      },
    ]),
  );
}
