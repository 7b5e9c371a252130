import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CUSTOMER_STATUS } from '../src/customers/status.ts';
import { IllegalTransition, type StateMachine } from '../src/infra/state-machine.ts';
import { OPERATION_STATUS } from '../src/operations/status.ts';
import { PROJECT_STATE } from '../src/projects/state.ts';
import { DELIVERY_STATE } from '../src/webhooks/delivery-state.ts';

/**
 * Every state machine over every pair of its states: a move is allowed exactly when the contract
 * (CONTRACT §6, the delivery rules of partner-api.md) lists it. The expected moves are written out
 * here, apart from the tables in the code, so a change to a table fails until it is meant.
 */
const EXPECTED: [StateMachine<string>, string[]][] = [
  [
    CUSTOMER_STATUS,
    [
      'provisioning→active',
      'provisioning→failed',
      'provisioning→deleting',
      'active→suspended',
      'active→deletion_scheduled',
      'active→deleting',
      'suspended→active',
      'suspended→deletion_scheduled',
      'suspended→deleting',
      'failed→deletion_scheduled',
      'failed→deleting',
      'deletion_scheduled→active',
      'deletion_scheduled→deleting',
    ],
  ],
  [PROJECT_STATE, ['provisioning→ready', 'provisioning→failed', 'ready→deleting', 'failed→deleting']],
  [OPERATION_STATUS, ['pending→running', 'pending→succeeded', 'pending→failed', 'running→succeeded', 'running→failed']],
  [DELIVERY_STATE, ['pending→pending', 'pending→delivered', 'pending→failed', 'pending→skipped']],
];

describe('state machines', () => {
  for (const [machine, moves] of EXPECTED) {
    test(`${machine.name}: exactly the listed moves, over all ${machine.states.length ** 2} pairs`, () => {
      const allowed = new Set(moves);
      for (const from of machine.states) {
        for (const to of machine.states) {
          const move = `${from}→${to}`;
          assert.equal(machine.can(from, to), allowed.has(move), move);
          if (allowed.has(move)) assert.equal(machine.move(from, to), to);
          else assert.throws(() => machine.move(from, to), IllegalTransition, move);
        }
      }
      // Terminal states have no way out: the last attempt, the last look always lands in one.
      assert.ok(
        machine.states.some((s) => machine.moves[s]?.length === 0),
        'the machine has a terminal state',
      );
    });
  }
});
