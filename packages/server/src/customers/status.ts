import { StateMachine } from '../infra/state-machine.ts';
import type { CustomerStatus } from './tables.ts';

/**
 * CONTRACT §6, customer status. A deleted customer is gone (its row removed from `deleting`); a
 * resume of a scheduled deletion restores `active` (a customer whose deletion was scheduled while
 * it had failed cannot be resumed: the service says CONFLICT before asking for the move).
 */
export const CUSTOMER_STATUS = new StateMachine<CustomerStatus>('customer status', {
  provisioning: ['active', 'failed', 'deleting'],
  active: ['suspended', 'deletion_scheduled', 'deleting'],
  suspended: ['active', 'deletion_scheduled', 'deleting'],
  failed: ['deletion_scheduled', 'deleting'],
  deletion_scheduled: ['active', 'deleting'],
  deleting: [],
});
