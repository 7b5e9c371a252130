import { createHmac, createSecretKey, randomBytes } from 'node:crypto';

/** partner-api.md, Limits: 64 hexadecimal characters. */
export function newSigningSecret(): string {
  return randomBytes(32).toString('hex');
}

/**
 * `X-Service-Signature` (CONTRACT §4, "Webhook signature: the key bytes"): HMAC-SHA256 of
 * `<timestamp>.<raw body>`, keyed with the secret's 64 characters as ASCII bytes.
 */
export function signDelivery(secret: string, timestamp: number, body: string): string {
  // Through a KeyObject: Node's import of a bare Buffer key costs three times the HMAC.
  const key = createSecretKey(Buffer.from(secret, 'ascii'));
  return `sha256=${createHmac('sha256', key).update(`${timestamp}.${body}`).digest('hex')}`;
}
