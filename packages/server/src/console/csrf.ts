import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Cross-site request protection for the console's forms (decision 142), two independent checks:
 * - the form carries a token derived from the session (an HMAC keyed with the session id, which only the
 *   HttpOnly cookie holds), so another site cannot know it, and nothing needs storing;
 * - the request's Origin (or, without one, its Referer) is the console's own origin.
 * The session cookie's SameSite=Lax already keeps it off cross-site POSTs in current browsers; these hold
 * where that does not (older browsers, a sibling subdomain).
 */
export function csrfToken(sessionId: string): string {
  return createHmac('sha256', sessionId).update('tenantry console form v1').digest('base64url');
}

export function validCsrfToken(sessionId: string, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const expected = Buffer.from(csrfToken(sessionId));
  const actual = Buffer.from(given);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** Whether a state-changing request comes from a page of `publicUrl`'s origin. */
export function fromOwnOrigin(headers: Record<string, string | string[] | undefined>, publicUrl: string): boolean {
  const own = new URL(publicUrl).origin;
  const origin = headers.origin;
  if (typeof origin === 'string' && origin !== 'null') return origin === own;
  if (typeof origin === 'string') return false;
  const referer = headers.referer;
  if (typeof referer !== 'string') return false;
  try {
    return new URL(referer).origin === own;
  } catch {
    return false;
  }
}
