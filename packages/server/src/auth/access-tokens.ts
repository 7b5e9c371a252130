import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { decodeCanonicalBase64url } from '../infra/encoding.ts';
import type { KeyMode } from '../infra/mode.ts';
import { isScope, type Scope } from '../partners/scopes.ts';

/**
 * Access tokens are self-contained and signed with a key every process of the
 * deployment shares (HMAC-SHA256, the key sealed at rest): checking one needs
 * no database read. A token is `tnt_at_<payload>.<signature>`, both base64url
 * without padding; the payload is internal and may change; partners treat the
 * token as opaque.
 *
 * Verification is strict: exactly one spelling of a token verifies (canonical
 * base64url, nothing after the signature), the payload has exactly the fields
 * and types this codec writes, and a token lives at most TOKEN_LIFETIME_S.
 * Whether its key exists and belongs to its partner and mode is the caller's
 * check (auth/service.ts), as is expiry against the clock.
 */
export interface TokenClaims {
  partnerId: string;
  kid: string;
  mode: KeyMode;
  scopes: Scope[];
  /** Epoch seconds. */
  issuedAt: number;
  expiresAt: number;
}

/** Verified claims, with the expiry also as an ISO string (whoami reports it on every call). */
export interface VerifiedClaims extends TokenClaims {
  expiresAtIso: string;
}

interface Payload {
  p: string;
  k: string;
  m: KeyMode;
  s: Scope[];
  iat: number;
  exp: number;
}

/** partner-api.md, Limits: tokens live at most 15 minutes. */
export const TOKEN_LIFETIME_S = 900;
const PREFIX = 'tnt_at_';
const SIGNATURE_BYTES = 32;
const MAX_TOKEN_LENGTH = 2048;
/** Verified tokens kept in memory; a token is a bearer secret, so they never leave the process. */
const CACHE_SIZE = 10_000;
/** The signature's length in a token: 32 bytes of base64url without padding. */
const SIGNATURE_CHARS = 43;

export class AccessTokenCodec {
  /**
   * A KeyObject, imported once: given a Buffer, Node imports the key again for every HMAC, which costs
   * more than the HMAC itself (about 11 µs against 3).
   */
  readonly #key: KeyObject;
  /**
   * Verified tokens by their signature, with the whole token kept to compare. Keyed by the whole token,
   * each lookup hashed all of a new string of about 250 characters (each request's header is a new
   * string), 0.4 µs of every authenticated request; the signature is the last 43 characters and as
   * unique as the token. A hit still needs the whole token to match: one comparison of its bytes.
   */
  readonly #verified = new Map<string, { token: string; claims: VerifiedClaims }>();

  constructor(key: Buffer) {
    this.#key = createSecretKey(key);
  }

  issue(claims: TokenClaims): string {
    const payload: Payload = {
      p: claims.partnerId,
      k: claims.kid,
      m: claims.mode,
      s: claims.scopes,
      iat: claims.issuedAt,
      exp: claims.expiresAt,
    };
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${PREFIX}${body}.${this.#sign(body).toString('base64url')}`;
  }

  /** The claims of a token this deployment signed, or undefined. Expiry is the caller's check. */
  verify(token: string): VerifiedClaims | undefined {
    const cached = this.#verified.get(token.slice(-SIGNATURE_CHARS));
    if (cached !== undefined && cached.token === token) return cached.claims;
    if (token.length > MAX_TOKEN_LENGTH || !token.startsWith(PREFIX)) return undefined;
    const parts = token.slice(PREFIX.length).split('.');
    if (parts.length !== 2) return undefined;
    const [body, signaturePart] = parts as [string, string];
    const presented = decodeCanonicalBase64url(signaturePart);
    if (presented?.length !== SIGNATURE_BYTES || !timingSafeEqual(presented, this.#sign(body))) return undefined;
    // Signed by this deployment: the body is one this codec wrote, unless the key leaked. Check it anyway.
    const bytes = decodeCanonicalBase64url(body);
    const payload = bytes ? parsePayload(bytes) : undefined;
    if (!payload) return undefined;
    const claims: VerifiedClaims = {
      partnerId: payload.p,
      kid: payload.k,
      mode: payload.m,
      scopes: payload.s,
      issuedAt: payload.iat,
      expiresAt: payload.exp,
      expiresAtIso: new Date(payload.exp * 1000).toISOString(),
    };
    if (this.#verified.size >= CACHE_SIZE) {
      const oldest = this.#verified.keys().next();
      if (!oldest.done) this.#verified.delete(oldest.value);
    }
    this.#verified.set(signaturePart, { token, claims });
    return claims;
  }

  #sign(body: string): Buffer {
    return createHmac('sha256', this.#key).update(body).digest();
  }
}

function parsePayload(bytes: Buffer): Payload | undefined {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const payload = value as Record<string, unknown>;
  if (Object.keys(payload).length !== 6) return undefined;
  const { p, k, m, s, iat, exp } = payload;
  if (typeof p !== 'string' || typeof k !== 'string' || (m !== 'live' && m !== 'test')) return undefined;
  if (!Array.isArray(s) || !s.every((scope) => typeof scope === 'string' && isScope(scope))) return undefined;
  if (!Number.isSafeInteger(iat) || !Number.isSafeInteger(exp)) return undefined;
  const lifetime = (exp as number) - (iat as number);
  if (lifetime <= 0 || lifetime > TOKEN_LIFETIME_S) return undefined;
  return payload as unknown as Payload;
}
