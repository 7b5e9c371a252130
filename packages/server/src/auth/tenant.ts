import type { Clock } from '../infra/clock.ts';
import { type KeyMode, modeNowMs } from '../infra/mode.ts';
import type { PartnerRow } from '../partners/tables.ts';
import type { PlatformContext } from '../platform/platform.ts';
import type { Principal } from './service.ts';

/**
 * Where a platform name must be unique: the live platform is one cluster shared by every partner
 * (organization and namespace names), each partner's test mode a sandbox of its own. `live` or
 * `test:<partner>` (the `platform_scope` column of customers, projects and users).
 */
export type PlatformScope = string;

/** The platform scope a partner's mode acts in. */
export function platformScope(partnerId: string, mode: KeyMode): PlatformScope {
  return mode === 'live' ? 'live' : `test:${partnerId}`;
}

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

/** Whose platform objects a request acts on, and when (no database handle: drivers keep their own state). */
export function platformContext(tenant: Tenant): PlatformContext {
  return { partnerId: tenant.partnerId, mode: tenant.mode, now: tenant.now };
}

/** The tenant of an authenticated request. */
export function requestTenant(request: { principal?: Principal }, clock: Clock): Tenant {
  if (!request.principal) throw new Error('route reached without authentication: declare config.scope');
  return tenantOf(request.principal, clock);
}
