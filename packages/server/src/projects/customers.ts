import type { Tenant } from '../auth/tenant.ts';
import type { Db } from '../infra/db/handle.ts';
import type { ProjectTables } from './tables.ts';

/** What projects read of their customer. */
export interface ProjectCustomer {
  uid: string;
  id: string;
  /** Its platform name: a project's namespace starts with it. */
  organization: string;
  status: string;
}

/**
 * What projects ask of the customers module, which the composition root wires: a project belongs to
 * a customer, but knows neither its tables nor its service. A handle passed is the caller's, so a lock
 * holds until the caller's transaction ends (lock order everywhere: partner, then customer, then project).
 */
export interface ProjectCustomers {
  /** Seconds a partner waits for a provisioning customer: NOT_READY's and TOO_MANY_OPERATIONS' Retry-After. */
  readonly retryAfterS: number;
  /** The customer of this partner and mode, or 404. */
  require(tenant: Tenant, id: string): Promise<ProjectCustomer>;
  /** `require`, its row locked in the caller's transaction. */
  lock(trx: Db<ProjectTables>, tenant: Tenant, id: string): Promise<ProjectCustomer>;
  /** `lock`, and 409 NOT_READY or CONFLICT unless the customer is active (`action` says what waits). */
  lockActive(trx: Db<ProjectTables>, tenant: Tenant, id: string, action: string): Promise<ProjectCustomer>;
  /** The id of the customer whose platform name is `name` in this platform scope (a namespace shares that name space). */
  namedOnPlatform(trx: Db<ProjectTables>, scope: string, name: string): Promise<string | undefined>;
  /** A customer by internal identity (an operation names it), whoever's it is. */
  byUid(uid: string): Promise<ProjectCustomer | undefined>;
  /** `byUid`, its row locked in the caller's transaction (an operation's outcome commits under it). */
  lockByUid(trx: Db<ProjectTables>, uid: string): Promise<ProjectCustomer | undefined>;
  /** A project of the customer now exists: if the customer's quota caps it, the platform must take the quota again. */
  reapplyQuota(trx: Db<ProjectTables>, uid: string, project: string): Promise<void>;
}
