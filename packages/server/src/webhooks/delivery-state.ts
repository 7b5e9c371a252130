import { StateMachine } from '../infra/state-machine.ts';
import type { DeliveryState } from './tables.ts';

/**
 * A delivery's state (`webhook_deliveries.state`): `pending` until an outcome; a retryable failure
 * stays `pending` (with its next attempt due later); the last attempt always lands in a terminal
 * state: `delivered`, `failed`, or `skipped` when the receiver no longer wants it (removed, disabled
 * or filtered out since the event was recorded).
 */
export const DELIVERY_STATE = new StateMachine<DeliveryState>('delivery state', {
  pending: ['pending', 'delivered', 'failed', 'skipped'],
  delivered: [],
  failed: [],
  skipped: [],
});
