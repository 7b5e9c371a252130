import type { Tenant } from '../auth/tenant.ts';
import { reapplyQuotaForProject } from '../capacity/customer-quotas.ts';
import { requireActiveCustomer } from '../customers/lifecycle.ts';
import { customerNamedOnPlatform, lockCustomerOfUid, requireCustomerLocked } from '../customers/lookup-service.ts';
import type { CustomerService } from '../customers/service.ts';
import type { Db } from '../infra/db/handle.ts';
import type { ProjectCustomers } from '../projects/customers.ts';
import type { UserCustomers } from '../users/customers.ts';
import { wholeDatabase } from './database.ts';

/**
 * What projects and users ask of a customer (each module declares its own `…Customers`), answered by
 * the customers module (and, for a project's quota cap, capacity). The caller's transaction is the whole database's, as every handle the
 * composition root hands out is, so the customers module's lookups run in it.
 */
export function customerAccess(customers: CustomerService): ProjectCustomers & UserCustomers {
  return {
    get retryAfterS() {
      return customers.retryAfterS;
    },
    require: (tenant: Tenant, id: string) => customers.require(tenant, id),
    lock: <T>(trx: Db<T>, tenant: Tenant, id: string) => requireCustomerLocked(wholeDatabase(trx), tenant, id),
    async lockActive<T>(trx: Db<T>, tenant: Tenant, id: string, action: string) {
      const customer = await requireCustomerLocked(wholeDatabase(trx), tenant, id);
      requireActiveCustomer(customer, action, customers.retryAfterS);
      return customer;
    },
    namedOnPlatform: <T>(trx: Db<T>, scope: string, name: string) => customerNamedOnPlatform(wholeDatabase(trx), scope, name),
    byUid: (uid: string) => customers.byUid(uid),
    lockByUid: <T>(trx: Db<T>, uid: string) => lockCustomerOfUid(wholeDatabase(trx), uid),
    reapplyQuota: <T>(trx: Db<T>, uid: string, project: string) => reapplyQuotaForProject(wholeDatabase(trx), uid, project),
  };
}
