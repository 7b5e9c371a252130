/**
 * Base64url as tokens and cursors use it, with exactly one spelling per value: the URL-safe
 * alphabet, no padding, and no unused bits in the last character. Node's decoder is lenient
 * (it accepts `+/`, `=`, stray characters and non-zero trailing bits), so several strings would
 * decode to the same bytes; a credential must have one spelling only.
 */
const BASE64URL = /^[A-Za-z0-9_-]*$/;

export function decodeCanonicalBase64url(text: string): Buffer | undefined {
  if (!BASE64URL.test(text) || text.length % 4 === 1) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}
