import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { atEndOfTurn } from './end-of-turn.ts';

test('work put off runs once, in order, after the rest of the turn; work it puts off runs in the next batch', async () => {
  const order: string[] = [];
  atEndOfTurn((name) => {
    order.push(name);
    atEndOfTurn((later) => order.push(later), 'put off by a task');
  }, 'first');
  atEndOfTurn((name) => order.push(name), 'second');
  order.push('the rest of the turn');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(order, ['the rest of the turn', 'first', 'second']);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(order, ['the rest of the turn', 'first', 'second', 'put off by a task']);
});

test('a task that throws does not keep the others of its batch from running, and its error still surfaces', () => {
  const module = fileURLToPath(new URL('./end-of-turn.ts', import.meta.url));
  const program = `
    const { atEndOfTurn } = await import(${JSON.stringify(module)});
    atEndOfTurn(() => { throw new Error('the first task failed'); }, undefined);
    atEndOfTurn(() => console.log('the second task ran'), undefined);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', program], { encoding: 'utf8' });
  assert.match(run.stdout, /the second task ran/);
  assert.match(run.stderr, /the first task failed/);
  assert.notEqual(run.status, 0, 'an uncaught exception, as in any callback of the loop');
});
