import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { ManualClock } from '../infra/clock.ts';
import type { Progress } from '../platform/platform.ts';
import { UserReadiness } from './readiness.ts';

const logger = pino({ level: 'silent' });

/** A platform whose user is in progress for `inProgress` asks (ready 20 ms on), then `last`. */
function identityProvider(inProgress: number, last: Progress) {
  const asks: number[] = [];
  const ask = async (): Promise<Progress> => {
    asks.push(asks.length);
    return asks.length <= inProgress ? { state: 'in_progress', until: new Date(Date.UTC(2026, 0, 1) + 20) } : last;
  };
  return { ask, asks };
}

const now = Date.UTC(2026, 0, 1);

test('a user ready at once is answered from the first ask', async () => {
  const idp = identityProvider(0, { state: 'done' });
  assert.deepEqual(await new UserReadiness(new ManualClock(now), logger).wait(idp.ask, now), { state: 'done' });
  assert.equal(idp.asks.length, 1);
});

test('a user the identity provider is still making is asked for again until it is done, or failed', async () => {
  const readiness = new UserReadiness(new ManualClock(now), logger);
  const done = identityProvider(3, { state: 'done' });
  const failed = identityProvider(1, { state: 'failed', code: 'PROVISIONING_FAILED', message: 'no realm' });
  const [a, b] = await Promise.all([readiness.wait(done.ask, now), readiness.wait(failed.ask, now)]);
  assert.deepEqual(a, { state: 'done' });
  assert.equal(done.asks.length, 4);
  assert.equal(b.state, 'failed');
  assert.equal(failed.asks.length, 2);
});

test('the wait ends on the injectable clock: past it, the request has the last answer, in progress', async () => {
  const clock = new ManualClock(now);
  const readiness = new UserReadiness(clock, logger);
  let asked = 0;
  const ask = async (): Promise<Progress> => {
    asked += 1;
    // The identity provider keeps answering "in progress"; the second ask finds the wait's 10 s gone.
    if (asked === 2) clock.advance(10_000);
    return { state: 'in_progress', until: new Date(now + 20) };
  };
  const answer = await readiness.wait(ask, now);
  assert.equal(answer.state, 'in_progress');
  assert.equal(asked, 2);
});
