import assert from 'node:assert/strict';
import { test } from 'node:test';
import { insideTransaction } from '../../test/in-transaction.ts';
import { NetworkCallInTransactionError } from '../infra/db/transactions.ts';
import { DestinationGuard, type Resolver } from './destination.ts';
import { WebhookSender } from './sender.ts';

/** A resolver that counts its lookups and answers a public address. */
function countingResolver(): Resolver & { lookups: number } {
  return {
    lookups: 0,
    async resolve() {
      this.lookups += 1;
      return ['93.184.216.34'];
    },
  };
}

test('the webhook destination check refuses to resolve a name with a database transaction open', async () => {
  const resolver = countingResolver();
  const guard = new DestinationGuard(resolver);
  const url = new URL('https://hooks.example.com/tenantry');
  await assert.rejects(
    insideTransaction(() => guard.check(url, false)),
    (error: unknown) => error instanceof NetworkCallInTransactionError && /DestinationGuard\.check/.test(error.message),
  );
  assert.equal(resolver.lookups, 0, 'no lookup was made');
  assert.equal((await guard.check(url, false)).ok, true, 'the same check after the transaction resolves');
  assert.equal(resolver.lookups, 1);
});

test('the webhook sender refuses a delivery with a database transaction open, before any lookup', async () => {
  const resolver = countingResolver();
  const sender = new WebhookSender({ guard: new DestinationGuard(resolver) });
  const delivery = { url: 'https://hooks.example.com/tenantry', allowPrivate: false, body: '{}', headers: {} };
  await assert.rejects(
    insideTransaction(() => sender.send(delivery)),
    (error: unknown) => error instanceof NetworkCallInTransactionError && /WebhookSender\.send/.test(error.message),
  );
  assert.equal(resolver.lookups, 0);
});
