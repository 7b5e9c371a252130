import { writeAudit } from '../audit/service.ts';
import type { AuditTables } from '../audit/tables.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound, validationError } from '../infra/errors/catalogue.ts';
import type { OperatorActor } from '../infra/http/operator-auth.ts';
import { requirePartner } from '../partners/service.ts';
import type { PartnerTables } from '../partners/tables.ts';
import { generateKey } from './api-key-format.ts';
import { normaliseCidrs } from './cidr.ts';
import type { KeyCache } from './key-cache.ts';
import type { KeyUsage } from './key-usage.ts';
import type { ApiKey, IssuedKey, IssueKeyRequest } from './keys-schemas.ts';
import { type ApiKeyRow, insertKey, listKeys, revokeKey } from './keys-store.ts';
import type { AuthTables } from './tables.ts';

/** The key service also reads the partner and writes the audit log, through their modules. */
type KeysDb = Db<AuthTables & PartnerTables & AuditTables>;

const iso = (date: Date | null): string | null => (date ? date.toISOString() : null);

export function toApiKey(row: ApiKeyRow, nowMs: number): ApiKey {
  const status = row.revoked_at ? 'revoked' : row.expires_at && row.expires_at.getTime() <= nowMs ? 'expired' : 'active';
  return {
    kid: row.kid,
    partner_id: row.partner_id,
    mode: row.mode,
    status,
    allow_cidrs: row.allow_cidrs,
    expires_at: iso(row.expires_at),
    created_at: row.created_at.toISOString(),
    revoked_at: iso(row.revoked_at),
    last_used_at: iso(row.last_used_at),
  };
}

/** The operator's side of API keys: issue (shown once), list (never a secret), revoke. */
export class KeyService {
  readonly #db: KeysDb;
  readonly #clock: Clock;
  readonly #cache: KeyCache;
  readonly #usage: KeyUsage;

  constructor(db: KeysDb, clock: Clock, cache: KeyCache, usage: KeyUsage) {
    this.#db = db;
    this.#clock = clock;
    this.#cache = cache;
    this.#usage = usage;
  }

  async issue(partnerId: string, request: IssueKeyRequest, who: OperatorActor): Promise<IssuedKey> {
    const now = this.#clock.now();
    const { cidrs, problems } = normaliseCidrs(request.allow_cidrs ?? []);
    const expiresAt = request.expires_at === undefined ? null : new Date(request.expires_at);
    if (expiresAt && expiresAt.getTime() <= now.getTime()) {
      problems.push({ in: 'body', field: 'expires_at', message: 'must be in the future' });
    }
    if (problems.length > 0) throw validationError(problems);
    const mode = request.mode ?? 'live';
    const key = generateKey(partnerId, mode);
    const row: ApiKeyRow = {
      kid: key.kid,
      partner_id: partnerId,
      mode,
      secret_hash: key.secretHash,
      allow_cidrs: cidrs,
      expires_at: expiresAt,
      created_at: now,
      revoked_at: null,
      last_used_at: null,
    };
    await this.#db.transaction().execute(async (trx) => {
      await requirePartner(trx, partnerId);
      await insertKey(trx, row);
      await writeAudit(trx, {
        ...who,
        at: now,
        action: 'key.issue',
        partnerId,
        target: `partner/${partnerId}/key/${key.kid}`,
        before: null,
        after: toApiKey(row, now.getTime()),
      });
    });
    return {
      key: key.key,
      kid: key.kid,
      partner_id: partnerId,
      mode,
      expires_at: iso(expiresAt),
      allow_cidrs: cidrs,
      created_at: now.toISOString(),
    };
  }

  async list(partnerId: string): Promise<ApiKey[]> {
    // This process's uses not yet written are written first: the list shows them.
    await this.#usage.flush();
    await requirePartner(this.#db, partnerId);
    const nowMs = this.#clock.nowMs();
    return (await listKeys(this.#db, partnerId)).map((row) => toApiKey(row, nowMs));
  }

  async revoke(partnerId: string, kid: string, who: OperatorActor): Promise<ApiKey> {
    const now = this.#clock.now();
    const result = await this.#db.transaction().execute(async (trx) => {
      const revoked = await revokeKey(trx, partnerId, kid, now);
      if (!revoked) {
        const existing = (await listKeys(trx, partnerId)).find((k) => k.kid === kid);
        if (!existing) throw notFound(`Key ${kid} of partner ${partnerId}`);
        throw new ApiError('CONFLICT', `Key ${kid} is already revoked.`, { details: { kid, revoked_at: iso(existing.revoked_at) } });
      }
      const after = toApiKey(revoked, now.getTime());
      await writeAudit(trx, {
        ...who,
        at: now,
        action: 'key.revoke',
        partnerId,
        target: `partner/${partnerId}/key/${kid}`,
        before: { ...after, status: 'active', revoked_at: null },
        after,
      });
      return after;
    });
    this.#cache.invalidate(kid);
    return result;
  }
}
