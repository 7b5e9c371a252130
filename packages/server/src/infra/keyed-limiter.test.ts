import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, it } from 'node:test';
import { KeyedLimiter } from './keyed-limiter.ts';

/** A task that finishes only when the test says so, recording that it started. */
function heldTasks() {
  const started: string[] = [];
  const releases = new Map<string, () => void>();
  const task = (name: string) => async () => {
    started.push(name);
    await new Promise<void>((resolve) => releases.set(name, resolve));
    return `done ${name}`;
  };
  const release = async (name: string) => {
    releases.get(name)?.();
    // Let the finished task hand its slot over and the next one start.
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  };
  return { task, started, release };
}

describe('KeyedLimiter', () => {
  it('runs at most `concurrency` tasks of a key at once, the others in order of arrival; other keys run beside them', async () => {
    const held = heldTasks();
    const limiter = new KeyedLimiter(2);
    const answers = ['a', 'b', 'c', 'd'].map((name) => limiter.run('k', held.task(name)));
    const other = limiter.run('other', held.task('x'));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(held.started, ['a', 'b', 'x']);
    assert.equal(limiter.waiting('k'), 2);
    await held.release('b');
    assert.deepEqual(held.started, ['a', 'b', 'x', 'c']);
    await held.release('a');
    await held.release('c');
    await held.release('d');
    await held.release('x');
    assert.deepEqual(await Promise.all([...answers, other]), ['done a', 'done b', 'done c', 'done d', 'done x']);
    assert.equal(limiter.waiting('k'), 0);
  });

  it('a task that fails gives its slot to the next, and its caller gets the error', async () => {
    const limiter = new KeyedLimiter(1);
    const failed = limiter.run('k', async () => {
      throw new Error('refused');
    });
    const next = limiter.run('k', async () => 'next');
    await assert.rejects(failed, /refused/);
    assert.equal(await next, 'next');
  });

  it("runs each task in its own caller's context, whoever's task freed the slot", async () => {
    const context = new AsyncLocalStorage<string>();
    const limiter = new KeyedLimiter(1);
    let release: () => void = () => {};
    const first = context.run('first', () =>
      limiter.run('k', async () => {
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        return context.getStore();
      }),
    );
    const second = context.run('second', () => limiter.run('k', async () => context.getStore()));
    release();
    assert.deepEqual(await Promise.all([first, second]), ['first', 'second']);
  });
});
