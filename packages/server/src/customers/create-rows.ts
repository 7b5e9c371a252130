import type { Tenant } from '../auth/tenant.ts';
import { newId } from '../infra/ids.ts';
import { newOperation } from '../operations/service.ts';
import type { OperationRow } from '../operations/tables.ts';
import type { ProjectRow } from '../projects/tables.ts';
import type { UserRow } from '../users/tables.ts';
import type { CreateCustomerRequest } from './schemas.ts';
import type { CustomerRow } from './tables.ts';

export type NewCustomerRows = { customer: CustomerRow; owner: UserRow; project: ProjectRow; operation: OperationRow };

/**
 * A new customer's rows as its create writes them: the customer (provisioning; its quota is capacity's),
 * its owner, its first project and its `customer.create` operation.
 */
export function newCustomerRows(
  tenant: Tenant,
  request: CreateCustomerRequest,
  names: { organization: string; namespace: string; project: string },
  platformStateAt: Date,
): NewCustomerRows {
  const now = tenant.now;
  const row: CustomerRow = {
    uid: newId('customer'),
    platform_scope: tenant.scope,
    partner_id: tenant.partnerId,
    mode: tenant.mode,
    id: request.id,
    organization: names.organization,
    external_id: request.external_id ?? null,
    display_name: request.display_name ?? null,
    status: 'provisioning',
    status_before_deletion: null,
    owner_username: request.owner.username,
    owner_email: request.owner.email,
    created_at: now,
    updated_at: now,
    suspended_at: null,
    suspension_reason: null,
    scheduled_deletion_at: null,
    grace_days: null,
    deletion_immediate: null,
    held_at: null,
    hold_reason: null,
  };
  // The owner and the first project are made on the platform by the operation (users and projects modules).
  const owner: UserRow = {
    uid: newId('user'),
    customer_uid: row.uid,
    platform_scope: tenant.scope,
    partner_id: tenant.partnerId,
    mode: tenant.mode,
    customer_id: row.id,
    username: request.owner.username,
    email: request.owner.email,
    email_key: request.owner.email.toLowerCase(),
    role: 'admin',
    is_owner: true,
    first_name: request.owner.first_name ?? null,
    last_name: request.owner.last_name ?? null,
    required_actions: [],
    created_at: now,
    platform_state: 'pending',
    platform_state_at: platformStateAt,
  };
  const project: ProjectRow = {
    uid: newId('project'),
    customer_uid: row.uid,
    platform_scope: tenant.scope,
    partner_id: tenant.partnerId,
    mode: tenant.mode,
    customer_id: row.id,
    name: names.project,
    state: 'provisioning',
    namespace: names.namespace,
    cidr: null,
    created_at: now,
    updated_at: now,
  };
  const operation = newOperation({
    partnerId: tenant.partnerId,
    mode: tenant.mode,
    type: 'customer.create',
    customerUid: row.uid,
    customerId: row.id,
    project: names.project,
    now,
  });
  return { customer: row, owner, project, operation };
}
