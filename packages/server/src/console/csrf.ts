/**
 * The origin half of the console form's protection against cross-site requests; the other
 * half is the session's own form token (`ConsoleSession.csrfToken`). The session cookie's SameSite=Lax
 * already keeps it off cross-site POSTs in current browsers; these hold where that does not (older
 * browsers, a sibling subdomain).
 *
 * Whether a state-changing request comes from a page of `publicUrl`'s origin. A browser names it in
 * `Origin`; under the console's `Referrer-Policy: no-referrer` it sends `Origin: null` on a POST instead,
 * and then its Fetch Metadata (`Sec-Fetch-Site`, which no page can set) says where the request comes
 * from. Without either (an older browser, a script), a same-origin `Referer` is the last witness.
 */
export function fromOwnOrigin(headers: Record<string, string | string[] | undefined>, publicUrl: string): boolean {
  const own = new URL(publicUrl).origin;
  const origin = headers.origin;
  if (typeof origin === 'string' && origin !== 'null') return origin === own;
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin';
  if (origin !== undefined) return false;
  const referer = headers.referer;
  if (typeof referer !== 'string') return false;
  try {
    return new URL(referer).origin === own;
  } catch {
    return false;
  }
}
