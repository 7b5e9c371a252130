import { StateMachine } from '../infra/state-machine.ts';
import type { OperationStatus } from './tables.ts';

/** CONTRACT §6: operations go `pending → running → succeeded | failed`; a step may also finish on its first look. */
export const OPERATION_STATUS = new StateMachine<OperationStatus>('operation status', {
  pending: ['running', 'succeeded', 'failed'],
  running: ['succeeded', 'failed'],
  succeeded: [],
  failed: [],
});

export const OPEN_STATUSES: readonly OperationStatus[] = ['pending', 'running'];
export const isOpen = (status: OperationStatus) => status === 'pending' || status === 'running';
