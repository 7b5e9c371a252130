import { createHmac, timingSafeEqual } from 'node:crypto';
import type { KeyMode } from '../infra/db/schema.ts';
import type { Scope } from './scopes.ts';

/**
 * Access tokens are self-contained and signed with a key every process of the
 * deployment shares (HMAC-SHA256): checking one needs no database read. A
 * token is `tnt_at_<payload>.<signature>`, both base64url; the payload is
 * internal and may change; partners treat the token as opaque.
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

const PREFIX = 'tnt_at_';
/** Verified tokens kept in memory; a token is a bearer secret, so they never leave the process. */
const CACHE_SIZE = 10_000;

export class AccessTokenCodec {
  readonly #key: Buffer;
  readonly #verified = new Map<string, VerifiedClaims>();

  constructor(key: Buffer) {
    this.#key = key;
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
    return `${PREFIX}${body}.${this.#sign(body)}`;
  }

  /** The claims of a token this deployment signed, or undefined. Expiry is the caller's check. */
  verify(token: string): VerifiedClaims | undefined {
    const cached = this.#verified.get(token);
    if (cached) return cached;
    if (!token.startsWith(PREFIX) || token.length > 2048) return undefined;
    const dot = token.lastIndexOf('.');
    if (dot < 0) return undefined;
    const body = token.slice(PREFIX.length, dot);
    const presented = Buffer.from(token.slice(dot + 1), 'base64url');
    const expected = Buffer.from(this.#sign(body), 'base64url');
    if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
    let payload: Payload;
    try {
      payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Payload;
    } catch {
      return undefined;
    }
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
    this.#verified.set(token, claims);
    return claims;
  }

  #sign(body: string): string {
    return createHmac('sha256', this.#key).update(body).digest('base64url');
  }
}
