/**
 * Webhook verification for receivers (partner-api.md, Verification rules for the receiver; CONTRACT,
 * "Webhook signature: the key bytes"). Web Crypto only, so it runs on Node 20+ and other fetch runtimes.
 */
/** How far the timestamp may be from the receiver's clock, either way. */
export const WEBHOOK_TOLERANCE_SECONDS = 300;
export class WebhookVerificationError extends Error {
  reason;
  constructor(reason, message) {
    super(message);
    this.name = 'WebhookVerificationError';
    this.reason = reason;
  }
}
const encoder = new TextEncoder();
function header(headers, name) {
  if (typeof headers.get === 'function') return headers.get(name) ?? undefined;
  const record = headers;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value[0] : value;
}
function bytes(body) {
  if (typeof body === 'string') return encoder.encode(body);
  return body instanceof Uint8Array ? body : new Uint8Array(body);
}
/** HMAC-SHA256 over `<timestamp>.<raw body>`, keyed with the secret's 64 characters as ASCII; lowercase hex. */
export async function computeSignature(secret, timestamp, rawBody) {
  const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const body = bytes(rawBody);
  const prefix = encoder.encode(`${timestamp}.`);
  const message = new Uint8Array(prefix.length + body.length);
  message.set(prefix, 0);
  message.set(body, prefix.length);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, message));
  return Array.from(mac, (b) => b.toString(16).padStart(2, '0')).join('');
}
/** Compares two strings in time that depends only on their length. */
function constantTimeEqual(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
/**
 * Verifies a delivery and returns its event, following the five rules: the raw body bytes, HMAC-SHA256
 * of `<timestamp>.<body>`, a constant-time comparison, a timestamp within 5 minutes either way, and only
 * then the parsed body. `secrets` may hold several (the new and the previous one during rotation).
 * Throws `WebhookVerificationError`; answer 400 then, and 2xx for events you do not handle.
 *
 * The result is the `WebhookEvent` union, discriminated by `event` (`switch (event.event)` narrows
 * `data`). The service may add events within v1: one this SDK version does not list still verifies,
 * so keep a `default:` branch that acknowledges and ignores it.
 */
export async function verifyWebhook(rawBody, headers, secrets, options = {}) {
  const timestamp = header(headers, 'x-service-timestamp');
  const signature = header(headers, 'x-service-signature');
  if (!timestamp || !signature)
    throw new WebhookVerificationError('missing_header', 'X-Service-Timestamp or X-Service-Signature is missing');
  if (!/^\d{1,12}$/.test(timestamp))
    throw new WebhookVerificationError('bad_timestamp', 'X-Service-Timestamp is not a Unix time in seconds');
  const nowS = (options.now ?? new Date()).getTime() / 1000;
  if (Math.abs(nowS - Number(timestamp)) > (options.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS)) {
    throw new WebhookVerificationError('stale_timestamp', 'X-Service-Timestamp is more than 5 minutes from this clock');
  }
  const given = signature.startsWith('sha256=') ? signature.slice('sha256='.length) : '';
  let matched = false;
  for (const secret of typeof secrets === 'string' ? [secrets] : secrets) {
    // Every secret is tried, so the time taken does not tell which one matched.
    if (constantTimeEqual(await computeSignature(secret, timestamp, rawBody), given)) matched = true;
  }
  if (!matched) throw new WebhookVerificationError('bad_signature', 'the signature does not match any of the secrets');
  let body;
  try {
    body = JSON.parse(new TextDecoder().decode(bytes(rawBody)));
  } catch {
    throw new WebhookVerificationError('bad_body', 'the signed body is not JSON');
  }
  const event = body;
  if (typeof event?.id !== 'string' || typeof event.event !== 'string' || typeof event.data !== 'object' || event.data === null) {
    throw new WebhookVerificationError('bad_body', 'the signed body is not an event (id, event and data)');
  }
  return body;
}
/** Signs a body as the service would, for testing a receiver: the headers to send with it. */
export async function signTestWebhook(event, secret, options = {}) {
  const body = JSON.stringify(event);
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'x-service-timestamp': timestamp,
      'x-service-signature': `sha256=${await computeSignature(secret, timestamp, body)}`,
      'x-service-event': event.event,
      'x-service-delivery': event.id,
    },
  };
}
/** An in-memory store that keeps the most recent `max` ids. */
export function memoryDedupeStore(max = 10_000) {
  const seen = new Set();
  return {
    has: (id) => seen.has(id),
    add(id) {
      seen.add(id);
      if (seen.size > max) seen.delete(seen.values().next().value);
    },
  };
}
/**
 * Runs `handle` once per delivery id (the body's `id`): an event already handled is skipped. The id is
 * recorded only when `handle` succeeds, so a failed attempt runs again on the service's retry.
 * Resolves `{ handled: false }` for a duplicate.
 */
export async function handleOnce(event, store, handle) {
  if (await store.has(event.id)) return { handled: false };
  const result = await handle(event);
  await store.add(event.id);
  return { handled: true, result };
}
