import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import type { BucketPolicy, RateDecision } from '../infra/rate-limit/gcra.ts';
import type { RateLimiter, ReservedRow } from '../infra/rate-limit/rate-limiter.ts';
import type { PartnerCache } from '../partners/partner-cache.ts';
import type { Scope } from '../partners/scopes.ts';
import { isScope } from '../partners/scopes.ts';
import type { PartnerRow } from '../partners/tables.ts';
import { type AccessTokenCodec, TOKEN_LIFETIME_S, type VerifiedClaims } from './access-tokens.ts';
import { DECOY_HASH, DECOY_KID, hashesMatch, hashSecret, parseKey } from './api-key-format.ts';
import { addressAllowed } from './cidr.ts';
import type { KeyCache, KeyFacts } from './key-cache.ts';
import type { KeyUsage } from './key-usage.ts';
import { findKeyCharging, findKeyWithPartner, type KeyWithPartner } from './keys-store.ts';
import type { TokenResponse, Whoami } from './schemas.ts';
import type { AuthTables } from './tables.ts';

export { TOKEN_LIFETIME_S };
/** partner-api.md, Limits: the token endpoint allows 30 requests per minute per key, burst 10. */
export const TOKEN_ENDPOINT_POLICY = { perMinute: 30, burst: 10 } as const;

/** One message for every credential failure, so a caller cannot tell which check failed. */
const INVALID_KEY = 'The API key is invalid, expired, revoked or not allowed from this address.';
const INVALID_TOKEN = 'The access token is invalid.';
/** The 401 of a request that sends its API key where the access token goes: the step it skipped. */
const API_KEY_AS_TOKEN =
  'This is an API key, not an access token: exchange it first (POST /api/public/v1/auth/token with {"api_key": "<key>"}) and send the access_token it answers as "Authorization: Bearer <token>".';
/** How far ahead of this process's clock another process's clock may be when it issues a token. */
const ISSUE_CLOCK_SKEW_MS = 60_000;

/** A request's authenticated identity: the verified token and its partner. */
export interface Principal {
  claims: VerifiedClaims;
  partner: PartnerRow;
}

export interface AuthServiceDeps {
  db: Db<AuthTables>;
  clock: Clock;
  tokens: AccessTokenCodec;
  partners: PartnerCache;
  keys: KeyCache;
  /** Keys' last use, written in batches (the operator's key list reads it). */
  keyUsage: KeyUsage;
  /** Buckets shared by the deployment: a partner's requests, a key's exchanges. */
  rateLimiter: RateLimiter;
  /**
   * This process's buckets of exchange attempts per (key, source address), checked before the secret
   * is: they keep a guessing client from spending this process's CPU, and cost no I/O.
   */
  attempts: RateLimiter;
}

export class AuthService {
  readonly #deps: AuthServiceDeps;
  /** whoami's answer by token (its verified claims) and the partner row it was built from. */
  readonly #answers = new WeakMap<VerifiedClaims, { json: string; partner: PartnerRow }>();

  constructor(deps: AuthServiceDeps) {
    this.#deps = deps;
  }

  /**
   * Exchanges an API key for an access token. Every credential failure takes
   * the same path (a key lookup and a constant-time hash comparison, with a
   * decoy when nothing matches) and answers the same 401.
   */
  async exchange(apiKey: string, sourceAddress: string): Promise<{ token: TokenResponse; rate: RateDecision }> {
    const { db, clock, tokens, rateLimiter, attempts, keyUsage } = this.#deps;
    const parsed = parseKey(apiKey);
    // Attempts are limited per (key, source address) before any check, so guessing is slow; the
    // key's own bucket is charged only once the secret matched, so nobody who merely knows a
    // kid can hold the key's exchanges at 429.
    let rate = await attempts.take(parsed ? `try:${parsed.kid}:${sourceAddress}` : `addr:${sourceAddress}`, TOKEN_ENDPOINT_POLICY);
    if (!rate.allowed) throw rateLimited(rate, 'Too many token requests for this key.');

    // On a shared database the key's bucket is charged in the key's own statement, and only if the
    // secret matched there, saving a round trip; the checks below still decide.
    const keyBucket = parsed ? `key:${parsed.kid}` : '';
    const carried = parsed ? rateLimiter.carry(keyBucket, TOKEN_ENDPOINT_POLICY) : undefined;
    const now = clock.now();
    // Hashed once, for the key's statement and the comparison below; a key that does not parse is
    // hashed too, so every failure costs the same.
    const secretHash = hashSecret(parsed?.secret ?? '');
    let found: { key: KeyWithPartner; reserved: ReservedRow | undefined } | undefined;
    if (parsed && carried) {
      const check = { secretHash, partnerId: parsed.partnerId, mode: parsed.mode, now };
      found = await findKeyCharging(db, parsed.kid, check, carried.values);
    } else {
      const key = await findKeyWithPartner(db, parsed?.kid ?? DECOY_KID);
      found = key ? { key, reserved: undefined } : undefined;
    }
    const row = found?.key;
    const secretOk = hashesMatch(secretHash, row?.secret_hash ?? DECOY_HASH);
    const valid =
      parsed !== undefined &&
      row !== undefined &&
      secretOk &&
      row.partner_id === parsed.partnerId &&
      row.mode === parsed.mode &&
      row.revoked_at === null &&
      (row.expires_at === null || row.expires_at.getTime() > now.getTime()) &&
      addressAllowed(sourceAddress, row.allow_cidrs);
    const settled = carried?.settle(found?.reserved);
    if (!valid || !row) throw withRate(new ApiError('UNAUTHORIZED', INVALID_KEY), rate);
    rate = settled ?? (await rateLimiter.take(keyBucket, TOKEN_ENDPOINT_POLICY));
    if (!rate.allowed) throw rateLimited(rate, 'Too many token requests for this key.');

    // Read with the key, not from the cache: a suspension or a new partner's readiness counts at once.
    if (row.partner_status === 'suspended') {
      throw withRate(new ApiError('PARTNER_SUSPENDED', 'The partner account is suspended. Contact the operator.'), rate);
    }
    if (row.partner_ready_at.getTime() > now.getTime()) {
      const waitS = Math.ceil((row.partner_ready_at.getTime() - now.getTime()) / 1000);
      throw withRate(
        new ApiError('PARTNER_NOT_READY', 'The partner credentials are still being provisioned.', { retryAfter: waitS }),
        rate,
      );
    }

    const nowS = Math.floor(now.getTime() / 1000);
    const keyExpiryS = row.expires_at ? Math.floor(row.expires_at.getTime() / 1000) : Number.POSITIVE_INFINITY;
    const expiresAt = Math.min(nowS + TOKEN_LIFETIME_S, keyExpiryS);
    // A key expiring within this second would give a token that is expired on arrival.
    if (expiresAt <= nowS) throw withRate(new ApiError('UNAUTHORIZED', INVALID_KEY), rate);
    const scopes = row.partner_scopes.filter(isScope);
    const accessToken = tokens.issue({
      partnerId: row.partner_id,
      kid: row.kid,
      mode: row.mode,
      scopes,
      issuedAt: nowS,
      expiresAt,
    });
    keyUsage.record(row, now);
    return {
      token: { access_token: accessToken, token_type: 'Bearer', expires_in: Math.max(1, expiresAt - nowS), scope: scopes.join(' ') },
      rate,
    };
  }

  /**
   * Verifies a bearer token, checks it against its key, and loads its partner (both cached
   * briefly). Synchronous when both are in their caches, which is nearly always: no promise on
   * the hot path.
   */
  authenticate(authorization: string | undefined, options: { allowSuspended?: boolean } = {}): Principal | Promise<Principal> {
    const { partners, keys } = this.#deps;
    const claims = this.#claims(authorization);
    if (typeof claims === 'string') throw new ApiError('UNAUTHORIZED', claims);
    const key = keys.peek(claims.kid);
    const partner = partners.peek(claims.partnerId);
    const allowSuspended = options.allowSuspended === true;
    if (key && partner) return principal(claims, key.facts, partner.row, allowSuspended);
    return Promise.all([key ? key.facts : keys.get(claims.kid), partner ? partner.row : partners.get(claims.partnerId)]).then(
      ([facts, row]) => principal(claims, facts, row, allowSuspended),
    );
  }

  /** A bearer header's verified claims, in date; or the message of the 401 that refuses it. */
  #claims(authorization: string | undefined): VerifiedClaims | string {
    const token = bearerToken(authorization);
    if (!token) return 'Send an access token as "Authorization: Bearer <token>".';
    if (token.startsWith('tnt_live_') || token.startsWith('tnt_test_')) return API_KEY_AS_TOKEN;
    const claims = this.#deps.tokens.verify(token);
    if (!claims) return INVALID_TOKEN;
    const nowMs = this.#deps.clock.nowMs();
    if (claims.expiresAt * 1000 <= nowMs) return 'The access token has expired.';
    if (claims.issuedAt * 1000 > nowMs + ISSUE_CLOCK_SKEW_MS) return INVALID_TOKEN;
    return claims;
  }

  /** The partner's token bucket (partner-api.md, Limits); shared by both modes. */
  takePartnerRequest(partner: PartnerRow): RateDecision | Promise<RateDecision> {
    return this.#deps.rateLimiter.take(`partner:${partner.id}`, partnerPolicy(partner));
  }

  /**
   * whoami's whole answer as JSON text, built once per token and partner row: a token's claims and a
   * cached partner row are the same objects until the row is read again, which is when the answer can
   * change (a customer count, a limit).
   */
  whoamiJson(principal: Principal): string {
    const { claims, partner } = principal;
    const known = this.#answers.get(claims);
    if (known !== undefined && known.partner === partner) return known.json;
    const json = JSON.stringify({ status: 'success', data: this.whoami(principal) });
    this.#answers.set(claims, { partner, json });
    return json;
  }

  whoami(principal: Principal): Whoami {
    const { partner, claims } = principal;
    return {
      partner: { id: partner.id, display_name: partner.display_name },
      scopes: claims.scopes,
      limits: {
        max_customers: partner.max_customers,
        max_usage_window_days: partner.usage_window_days,
        max_projects_per_customer: partner.max_projects_per_customer,
        max_open_operations: partner.max_open_operations,
        rate_limit_per_minute: partner.rate_limit_per_minute,
        rate_limit_burst: partner.rate_limit_burst,
      },
      // Each mode counts its own customers (CONTRACT §5: test data never mixes with live).
      customer_count: claims.mode === 'live' ? partner.customer_count : partner.test_customer_count,
      defaults: { plan_id: partner.default_plan_id, grace_days: partner.grace_days, project: partner.default_project },
      token: { expires_at: claims.expiresAtIso, kid: claims.kid, mode: claims.mode },
    };
  }
}

export function requireScope(principal: Principal, scope: Scope): void {
  if (!principal.claims.scopes.includes(scope)) {
    throw new ApiError('FORBIDDEN', `This call needs the ${scope} scope; the token has: ${principal.claims.scopes.join(' ') || 'none'}.`, {
      details: { required_scope: scope, token_scopes: principal.claims.scopes },
    });
  }
}

export function rateLimitHeaders(rate: RateDecision): Record<string, string> {
  return { 'x-ratelimit-limit': String(rate.limit), 'x-ratelimit-remaining': String(rate.remaining) };
}

export function rateLimited(rate: RateDecision, message: string): ApiError {
  return new ApiError('RATE_LIMITED', message, {
    retryAfter: rate.retryAfterS,
    headers: rateLimitHeaders(rate),
    details: { limit_per_minute: rate.limit, retry_after_seconds: rate.retryAfterS },
  });
}

function principal(claims: VerifiedClaims, key: KeyFacts | undefined, partner: PartnerRow | undefined, allowSuspended: boolean): Principal {
  const refused = refusal(claims, key, partner, allowSuspended);
  if (refused) throw refused;
  return { claims, partner: partner as PartnerRow };
}

/** Why a verified token has no principal (its key could not have issued it, its partner is gone or suspended), or undefined. */
function refusal(
  claims: VerifiedClaims,
  key: KeyFacts | undefined,
  partner: PartnerRow | undefined,
  allowSuspended: boolean,
): ApiError | undefined {
  if (!partner || !keyIssued(claims, key)) return new ApiError('UNAUTHORIZED', INVALID_TOKEN);
  if (partner.status === 'suspended' && !allowSuspended) return partnerSuspended();
  return undefined;
}

/** The partner's bucket's policy (partner-api.md, Limits). */
function partnerPolicy(partner: PartnerRow): BucketPolicy {
  return { perMinute: partner.rate_limit_per_minute, burst: partner.rate_limit_burst };
}

/** partner-api.md: calls with tokens issued before a suspension answer 403 FORBIDDEN. */
export function partnerSuspended(): ApiError {
  return new ApiError('FORBIDDEN', 'The partner account is suspended.');
}

/**
 * Whether the token's key could have issued it: the key exists, belongs to the token's partner and
 * mode, existed when the token was issued, was not yet revoked then (partner-api.md: a revocation
 * leaves issued tokens valid until they expire), and outlives the token.
 */
function keyIssued(claims: VerifiedClaims, key: KeyFacts | undefined): boolean {
  if (!key || key.partnerId !== claims.partnerId || key.mode !== claims.mode) return false;
  const issuedAtMs = claims.issuedAt * 1000;
  if (issuedAtMs + 999 < key.createdAtMs) return false;
  if (key.revokedAtMs !== null && issuedAtMs > key.revokedAtMs) return false;
  return key.expiresAtMs === null || claims.expiresAt * 1000 <= key.expiresAtMs;
}

function withRate(error: ApiError, rate: RateDecision): ApiError {
  return new ApiError(error.code, error.message, {
    ...(error.details ? { details: error.details } : {}),
    ...(error.retryAfter !== undefined ? { retryAfter: error.retryAfter } : {}),
    headers: rateLimitHeaders(rate),
  });
}

function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const space = header.indexOf(' ');
  if (space < 0 || header.slice(0, space).toLowerCase() !== 'bearer') return undefined;
  const token = header.slice(space + 1).trim();
  return token.length > 0 ? token : undefined;
}
