import type { DeliveryState } from '../events/tables.ts';
import { StateMachine } from '../infra/state-machine.ts';

/**
 * A delivery's state (the webhooks module's columns of the events outbox): `pending` until an
 * outcome; a retryable failure stays `pending` (with its next attempt due later); the last attempt
 * always lands in a terminal state: `delivered`, `failed`, or `skipped` when no receiver wants it.
 */
export const DELIVERY_STATE = new StateMachine<DeliveryState>('delivery state', {
  pending: ['pending', 'delivered', 'failed', 'skipped'],
  delivered: [],
  failed: [],
  skipped: [],
});
