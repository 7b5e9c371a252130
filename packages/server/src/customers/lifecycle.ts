import type { NewEvent } from '../events/payloads.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import { expediteOperationsOf, queueOperation } from '../operations/service.ts';
import type { OperationRow, OperationTables } from '../operations/tables.ts';
import type { OrganizationRef } from '../platform/platform.ts';
import { type CustomerRow, setCustomerStatus } from './store.ts';
import type { CustomerTables } from './tables.ts';

/** A lifecycle change also queues and expedites the customer's operations. */
type LifecycleDb = Db<CustomerTables & OperationTables>;

/** A customer as the platform names it. */
export function organizationRef(customer: Pick<CustomerRow, 'id' | 'organization'>): OrganizationRef {
  return { customerId: customer.id, organization: customer.organization };
}

/**
 * CONTRACT §6: a request that needs an active customer answers 409 NOT_READY while it provisions
 * (with the provisioning time as its Retry-After) and 409 CONFLICT while it is suspended,
 * failed or being deleted.
 */
export function requireActiveCustomer(row: CustomerRow, action: string, retryAfterS: number): void {
  if (row.status === 'active') return;
  if (row.status === 'provisioning') {
    throw new ApiError('NOT_READY', `Customer ${row.id} is still provisioning; ${action} once it is active.`, {
      retryAfter: retryAfterS,
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
 * Starts tearing a customer down (an immediate delete, or the end of a grace period), in the
 * caller's transaction with the customer row locked: the customer turns `deleting`, a
 * `customer.delete` operation runs the teardown (it stops the workloads, then removes the
 * organization: platform work, done by the engine after this commits), and its other open
 * operations are looked at at once (they fail with CUSTOMER_DELETING).
 */
export async function startTeardown(
  trx: LifecycleDb,
  row: CustomerRow,
  immediate: boolean,
  now: Date,
): Promise<{ customer: CustomerRow; operation: OperationRow }> {
  await expediteOperationsOf(trx, row.uid, now);
  const customer = await setCustomerStatus(trx, row, 'deleting', {
    deletion_immediate: immediate,
    scheduled_deletion_at: immediate ? null : row.scheduled_deletion_at,
    updated_at: now,
  });
  const operation = await queueOperation(trx, {
    partnerId: row.partner_id,
    mode: row.mode,
    type: 'customer.delete',
    customerUid: row.uid,
    customerId: row.id,
    project: null,
    now,
  });
  return { customer, operation };
}

/** `customer.suspended` with what the platform reported. */
export function suspendedEvent(
  row: Pick<CustomerRow, 'partner_id' | 'mode' | 'id' | 'updated_at' | 'suspended_at'>,
  workloadsRunning: number,
): NewEvent<'customer.suspended'> {
  return {
    partnerId: row.partner_id,
    mode: row.mode,
    type: 'customer.suspended',
    at: row.updated_at,
    data: {
      customer_id: row.id,
      state: 'suspended',
      suspended_at: (row.suspended_at ?? row.updated_at).toISOString(),
      workloads_running: workloadsRunning,
    },
  };
}

/** `customer.resumed` with what the platform reported, and whether it cancelled a scheduled deletion. */
export function resumedEvent(
  row: Pick<CustomerRow, 'partner_id' | 'mode' | 'id'>,
  at: Date,
  workloadsRunning: number,
  cancelled: boolean,
): NewEvent<'customer.resumed'> {
  return {
    partnerId: row.partner_id,
    mode: row.mode,
    type: 'customer.resumed',
    at,
    data: { customer_id: row.id, state: 'active', workloads_running: workloadsRunning, cancelled_scheduled_deletion: cancelled },
  };
}
