import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeyedBatches } from './keyed-batches.ts';

/** A runner whose batches finish only when the test says so, recording each batch it was given. */
function heldRunner(fail: (items: string[]) => boolean = () => false) {
  const batches: string[][] = [];
  const releases: (() => void)[] = [];
  const run = async (items: string[]) => {
    batches.push(items);
    await new Promise<void>((resolve) => releases.push(resolve));
    if (fail(items)) throw new Error(`refused ${items.join(',')}`);
    return items.map((item) => `done ${item}`);
  };
  /** Lets the oldest running batch finish, then lets the runner start what follows. */
  const releaseOne = async () => {
    releases.shift()?.();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { run, batches, releaseOne };
}

describe('KeyedBatches', () => {
  it('runs an item at once while the key has a free slot, and what arrives meanwhile together in the next batch', async () => {
    const runner = heldRunner();
    const batches = new KeyedBatches(runner.run, { concurrency: 1, maxBatch: 10 });
    const answers = ['a', 'b', 'c', 'd'].map((item) => batches.submit('k', item));
    assert.deepEqual(runner.batches, [['a']]);
    assert.equal(batches.waiting('k'), 3);
    await runner.releaseOne();
    assert.deepEqual(runner.batches, [['a'], ['b', 'c', 'd']]);
    await runner.releaseOne();
    assert.deepEqual(await Promise.all(answers), ['done a', 'done b', 'done c', 'done d']);
  });

  it('keeps at most `concurrency` batches of a key running and at most `maxBatch` items in one; other keys run beside them', async () => {
    const runner = heldRunner();
    const batches = new KeyedBatches(runner.run, { concurrency: 2, maxBatch: 2 });
    const answers = ['1', '2', '3', '4', '5', '6'].map((item) => batches.submit('k', item));
    const other = batches.submit('other', 'x');
    assert.deepEqual(runner.batches, [['1'], ['2'], ['x']]);
    await runner.releaseOne();
    assert.deepEqual(runner.batches.slice(3), [['3', '4']]);
    await runner.releaseOne();
    await runner.releaseOne();
    assert.deepEqual(runner.batches.slice(4), [['5', '6']]);
    await runner.releaseOne();
    await runner.releaseOne();
    assert.deepEqual(
      await Promise.all([...answers, other]),
      ['1', '2', '3', '4', '5', '6', 'x'].map((item) => `done ${item}`),
    );
  });

  it('runs each item of a failed batch again alone, ahead of later arrivals, so each gets its own answer', async () => {
    // Any batch holding `bad` fails, as a statement fails for one row's sake.
    const runner = heldRunner((items) => items.includes('bad'));
    const batches = new KeyedBatches(runner.run, { concurrency: 1, maxBatch: 10 });
    const first = batches.submit('k', 'first');
    const together = ['p', 'bad', 'q'].map((item) => batches.submit('k', item).catch((error: Error) => error.message));
    await runner.releaseOne();
    assert.deepEqual(runner.batches, [['first'], ['p', 'bad', 'q']]);
    const later = batches.submit('k', 'later');
    await runner.releaseOne();
    for (let i = 0; i < 3; i++) await runner.releaseOne();
    await runner.releaseOne();
    assert.deepEqual(runner.batches.slice(2), [['p'], ['bad'], ['q'], ['later']]);
    assert.equal(await first, 'done first');
    assert.deepEqual(await Promise.all(together), ['done p', 'refused bad', 'done q']);
    assert.equal(await later, 'done later');
  });

  it('runs a batch answering the wrong number of results again item by item, and takes new work for the key afterwards', async () => {
    let calls = 0;
    const batches = new KeyedBatches(
      async (items: number[]) => {
        calls++;
        await new Promise((resolve) => setImmediate(resolve));
        return items.length > 1 ? [0] : items.map((n) => n * 2);
      },
      { concurrency: 1, maxBatch: 10 },
    );
    assert.deepEqual(await Promise.all([1, 2, 3].map((n) => batches.submit('k', n))), [2, 4, 6]);
    // 1 alone, then 2 and 3 together (refused: one result for two), then each alone.
    assert.equal(calls, 4);
    assert.equal(await batches.submit('k', 5), 10);
  });
});
