import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GroupCommit, type Outcome } from './group-commit.ts';

/** A runner whose batches finish only when the test says so, recording each batch it was given. */
function heldRunner(refuse: (item: string) => boolean = () => false) {
  const batches: string[][] = [];
  const releases: (() => void)[] = [];
  const run = async (items: string[]): Promise<Outcome<string>[]> => {
    batches.push(items);
    await new Promise<void>((resolve) => releases.push(resolve));
    return items.map((item) => (refuse(item) ? { ok: false, error: new Error(`refused ${item}`) } : { ok: true, value: `done ${item}` }));
  };
  const releaseOne = async () => {
    releases.shift()?.();
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  };
  return { run, batches, releaseOne };
}

describe('GroupCommit', () => {
  it('runs an item at once on an idle key; what arrives meanwhile goes together in the next batch, up to maxBatch', async () => {
    const runner = heldRunner();
    const commits = new GroupCommit(runner.run, { maxBatch: 2 });
    const answers = ['a', 'b', 'c', 'd'].map((item) => commits.submit('k', item));
    const other = commits.submit('other', 'x');
    assert.deepEqual(runner.batches, [['a'], ['x']], 'other keys do not wait');
    assert.equal(commits.waiting('k'), 3);
    await runner.releaseOne();
    assert.deepEqual(runner.batches.at(-1), ['b', 'c']);
    await runner.releaseOne();
    await runner.releaseOne();
    assert.deepEqual(runner.batches.at(-1), ['d']);
    await runner.releaseOne();
    assert.deepEqual(await Promise.all([...answers, other]), ['done a', 'done b', 'done c', 'done d', 'done x']);
    assert.equal(commits.waiting('k'), 0);
  });

  it('an item refused in a batch gets its own error; the others of the batch their values', async () => {
    const runner = heldRunner((item) => item === 'bad');
    const commits = new GroupCommit(runner.run, { maxBatch: 10 });
    const first = commits.submit('k', 'first');
    const bad = assert.rejects(commits.submit('k', 'bad'), /refused bad/);
    const good = commits.submit('k', 'good');
    await runner.releaseOne();
    await runner.releaseOne();
    assert.equal(await first, 'done first');
    await bad;
    assert.equal(await good, 'done good');
  });

  it('a batch that throws fails each of its items with that error, and the key goes on', async () => {
    let calls = 0;
    const commits = new GroupCommit<string, string>(
      async (items) => {
        calls++;
        if (calls === 1) throw new Error('database away');
        return items.map((item) => ({ ok: true, value: item }));
      },
      { maxBatch: 10 },
    );
    await assert.rejects(commits.submit('k', 'lost'), /database away/);
    assert.equal(await commits.submit('k', 'next'), 'next');
  });
});
