import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import pino from 'pino';
import { Poller } from './poller.ts';

const logger = pino({ level: 'silent' });
/** Long enough that a pass in a test can only come from a kick or a wake, never from the interval. */
const NEVER_MS = 60_000;
/** Every poller a test made is stopped after it, passed or failed (an armed timer would keep the run alive). */
const made: Poller[] = [];
afterEach(async () => {
  await Promise.all(made.splice(0).map((poller) => poller.stop()));
});

/** Lets a pass that just ran end completely (the poller is idle, its timer armed for the interval). */
const idle = () => new Promise((resolve) => setImmediate(resolve));

/** A poller whose passes are counted, and a promise for the pass with a given number. */
function counted(pass: (n: number) => Promise<boolean> = async () => false) {
  let passes = 0;
  const waiters = new Map<number, () => void>();
  const poller = new Poller(
    'test',
    async () => {
      passes++;
      const more = await pass(passes);
      waiters.get(passes)?.();
      return more;
    },
    logger,
  );
  made.push(poller);
  return {
    poller,
    passes: () => passes,
    /** Resolves at pass `n`; fails if it does not come within 5 s (a pass lost for good would otherwise hang). */
    pass: (n: number) =>
      new Promise<void>((resolve, reject) => {
        if (passes >= n) return resolve();
        const timer = setTimeout(() => reject(new Error(`pass ${n} did not come (${passes} so far)`)), 5_000);
        waiters.set(n, () => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

/** Starts a poller whose first pass calls `during` and stays in progress until the next macrotask. */
function duringFirstPass(during: (poller: Poller) => void) {
  let release: () => void = () => {};
  const made = counted(async (n) => {
    if (n === 1) {
      during(made.poller);
      await new Promise<void>((resolve) => {
        release = resolve;
      });
    }
    return false;
  });
  made.poller.start(NEVER_MS);
  setImmediate(() => release());
  return made;
}

describe('Poller', () => {
  it('runs a pass at start and at each kick', async () => {
    const { poller, pass, passes } = counted();
    poller.start(NEVER_MS);
    await pass(1);
    poller.kick();
    await pass(2);
    await poller.stop();
    assert.equal(passes(), 2);
  });

  it('comes back when asked with wakeIn, long before the interval', async () => {
    const { poller, pass } = counted();
    poller.start(NEVER_MS);
    await pass(1);
    await idle();
    const asked = performance.now();
    poller.wakeIn(30);
    await pass(2);
    const waited = performance.now() - asked;
    await poller.stop();
    assert.ok(waited >= 25 && waited < 5_000, `the pass came after ${waited} ms`);
  });

  it('keeps a wake asked for during a pass, and the earliest of several', async () => {
    const { poller, pass } = duringFirstPass((poller) => {
      // While the first pass runs: a wake far away, then a near one.
      poller.wakeIn(NEVER_MS / 2);
      poller.wakeIn(20);
    });
    await pass(2);
    await poller.stop();
  });

  it('keeps a wake for later when a kick brings a pass sooner', async () => {
    const { poller, pass } = counted();
    poller.start(NEVER_MS);
    await pass(1);
    await idle();
    poller.wakeIn(40);
    poller.kick();
    await pass(2);
    // The kick's pass came before the wake was due: the wake still brings its own.
    await pass(3);
    await poller.stop();
  });

  it('runs again at once while a pass says more is waiting', async () => {
    const { poller, pass, passes } = counted(async (n) => n < 3);
    poller.start(NEVER_MS);
    await pass(3);
    await poller.stop();
    assert.equal(passes(), 3);
  });

  it('a kick during a pass gives one more pass after it', async () => {
    const { poller, pass } = duringFirstPass((poller) => {
      poller.kick();
      poller.kick();
    });
    await pass(2);
    await poller.stop();
  });

  it('a stopped poller ignores kicks and wakes', async () => {
    const { poller, pass, passes } = counted();
    poller.start(NEVER_MS);
    await pass(1);
    await poller.stop();
    poller.kick();
    poller.wakeIn(0);
    // kick() on a stopped poller starts nothing synchronously; wakeIn arms no timer that could keep the process alive.
    assert.equal(passes(), 1);
  });
});
