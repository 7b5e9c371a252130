import type { PlatformScope, Tenant } from '../auth/tenant.ts';
import type { Db } from '../infra/db/handle.ts';
import type { UserTables } from './tables.ts';

/** What users read of their customer. */
export interface UserCustomer {
  uid: string;
  id: string;
  /** Its platform name: the identity provider's organization its users belong to. */
  organization: string;
  status: string;
  platform_scope: PlatformScope;
}

/**
 * What users ask of the customers module, which the composition root wires: a user belongs to a
 * customer, but knows neither its tables nor its service. A handle passed is the caller's, so a lock
 * holds until the caller's transaction ends.
 */
export interface UserCustomers {
  /** Seconds a partner waits for a provisioning customer: NOT_READY's Retry-After. */
  readonly retryAfterS: number;
  /** The customer of this partner and mode, or 404. */
  require(tenant: Tenant, id: string): Promise<UserCustomer>;
  /** `require`, its row locked in the caller's transaction. */
  lock(trx: Db<UserTables>, tenant: Tenant, id: string): Promise<UserCustomer>;
  /** `lock`, and 409 NOT_READY or CONFLICT unless the customer is active (`action` says what waits). */
  lockActive(trx: Db<UserTables>, tenant: Tenant, id: string, action: string): Promise<UserCustomer>;
  /** A customer by internal identity, whoever's it is. */
  byUid(uid: string): Promise<UserCustomer | undefined>;
}
