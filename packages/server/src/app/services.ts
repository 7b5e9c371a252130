import type { Logger } from 'pino';
import { AccessTokenCodec } from '../auth/access-tokens.ts';
import { KeyService } from '../auth/keys-service.ts';
import { AuthService } from '../auth/service.ts';
import type { Clock } from '../infra/clock.ts';
import type { DatabaseHandle } from '../infra/db/database.ts';
import { CursorCodec } from '../infra/pagination/cursor.ts';
import { createRateLimiter } from '../infra/rate-limit/rate-limiter.ts';
import { loadServerSecrets } from '../infra/secrets/server-secrets.ts';
import { PartnerCache } from '../partners/partner-cache.ts';
import { PartnerService } from '../partners/service.ts';

/** What the composition root needs to know to wire the modules together. */
export interface ServiceOptions {
  database: DatabaseHandle;
  clock: Clock;
  logger: Logger;
  partnerCacheMs: number;
  /** The sandbox platform's provisioning time; a new partner's credentials take a third of it. */
  sandboxDelayMs: number;
  trustProxy: false | number | string[];
}

/** Every module's service, wired once per process. Routes receive what they use from here. */
export interface Services {
  options: ServiceOptions;
  cursors: CursorCodec;
  partners: PartnerService;
  partnerCache: PartnerCache;
  keys: KeyService;
  auth: AuthService;
}

export async function createServices(options: ServiceOptions): Promise<Services> {
  const { database, clock } = options;
  const { db, embedded } = database;
  const secrets = await loadServerSecrets(db);
  const cursors = new CursorCodec(secrets.cursorSigningKey);
  const partnerCache = new PartnerCache(db, clock, options.partnerCacheMs);
  const rateLimiter = createRateLimiter(db, embedded, clock);
  return {
    options,
    cursors,
    partnerCache,
    partners: new PartnerService({ db, clock, cursors, cache: partnerCache, setupMs: Math.round(options.sandboxDelayMs / 3) }),
    keys: new KeyService(db, clock),
    auth: new AuthService({ db, clock, tokens: new AccessTokenCodec(secrets.tokenSigningKey), partners: partnerCache, rateLimiter }),
  };
}
