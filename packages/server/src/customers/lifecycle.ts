import type { Db } from '../infra/db/database.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import { expediteCustomerOperations, insertOperation, type OperationRow } from '../operations/store.ts';
import type { Platform, PlatformContext } from '../platform/platform.ts';
import { type CustomerRow, updateCustomer } from './store.ts';

/**
 * CONTRACT §6: a request that needs an active customer answers 409
 * NOT_READY while it provisions and 409 CONFLICT while it is suspended,
 * failed or being deleted.
 */
export function requireActiveCustomer(row: CustomerRow, action: string): void {
  if (row.status === 'active') return;
  if (row.status === 'provisioning') {
    throw new ApiError('NOT_READY', `Customer ${row.id} is still provisioning; ${action} once it is active.`, {
      retryAfter: 1,
      details: { customer_id: row.id, status: row.status },
    });
  }
  throw new ApiError('CONFLICT', `Customer ${row.id} is ${describeStatus(row.status)}; ${action} needs an active customer.`, {
    details: { customer_id: row.id, status: row.status },
  });
}

export function describeStatus(status: CustomerRow['status']): string {
  switch (status) {
    case 'deletion_scheduled':
      return 'scheduled for deletion';
    case 'deleting':
      return 'being deleted';
    default:
      return status;
  }
}

/**
 * Starts tearing a customer down (an immediate delete, or the end of a
 * grace period): the customer turns `deleting`, a `customer.delete`
 * operation runs the teardown, its workloads stop, and its other open
 * operations are looked at at once (they fail with CUSTOMER_DELETING).
 * Runs in the caller's transaction, with the customer row locked.
 */
export async function startTeardown(
  trx: Db,
  platform: Platform,
  ctx: PlatformContext,
  row: CustomerRow,
  immediate: boolean,
): Promise<{ customer: CustomerRow; operation: OperationRow }> {
  const now = ctx.now;
  await expediteCustomerOperations(trx, row.uid, now);
  const customer = await updateCustomer(trx, row.uid, {
    status: 'deleting',
    deletion_immediate: immediate,
    scheduled_deletion_at: immediate ? null : row.scheduled_deletion_at,
    updated_at: now,
  });
  const operation = await insertOperation(trx, {
    partnerId: row.partner_id,
    mode: row.mode,
    type: 'customer.delete',
    customerUid: row.uid,
    customerId: row.id,
    project: null,
    now,
  });
  await platform.stopWorkloads({ ...ctx, db: trx }, row.id);
  return { customer, operation };
}
