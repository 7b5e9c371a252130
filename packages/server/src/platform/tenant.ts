import type { Principal } from '../auth/service.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/database.ts';
import type { KeyMode, PlatformScope } from '../infra/db/schema.ts';
import type { PartnerRow } from '../partners/store.ts';
import { modeNowMs } from '../test-mode/mode-clock.ts';
import { type PlatformContext, platformScope } from './platform.ts';

/** Whose data a request acts on, and when: the partner, its mode and that mode's clock. */
export interface Tenant {
  partner: PartnerRow;
  partnerId: string;
  mode: KeyMode;
  scope: PlatformScope;
  now: Date;
}

export function tenantOf(principal: Principal, clock: Clock): Tenant {
  const { partner, claims } = principal;
  return {
    partner,
    partnerId: partner.id,
    mode: claims.mode,
    scope: platformScope(partner.id, claims.mode),
    now: new Date(modeNowMs(clock, partner.test_clock_offset_ms, claims.mode)),
  };
}

export function platformContext(db: Db, tenant: Tenant): PlatformContext {
  return { db, partnerId: tenant.partnerId, mode: tenant.mode, scope: tenant.scope, now: tenant.now };
}

/** The tenant of an authenticated request. */
export function requestTenant(request: { principal?: Principal }, clock: Clock): Tenant {
  if (!request.principal) throw new Error('route reached without authentication: declare config.scope');
  return tenantOf(request.principal, clock);
}
