import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { LOG_BUFFER } from './logger.ts';

/**
 * Every line reaches stdout whole and in order through the batched writes (decision 218): many short
 * lines, and lines longer than one write, from a process that flushes only when it exits.
 */
test('the log loses, cuts and reorders nothing: short lines and lines longer than a write, through a pipe', async () => {
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { createLogger } = await import(${JSON.stringify(new URL('./logger.ts', import.meta.url).href)});
       const logger = createLogger('info');
       for (let i = 0; i < 5000; i++) logger.info({ i, filler: i % 500 === 0 ? 'x'.repeat(${LOG_BUFFER.maxWrite * 3}) : 'y' }, 'line');
       logger.flush();`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  const code = await new Promise((resolve) => child.on('close', resolve));
  assert.equal(code, 0);
  const lines = out.trimEnd().split('\n');
  assert.equal(lines.length, 5000);
  lines.forEach((line, i) => {
    const parsed = JSON.parse(line) as { i: number; filler: string; msg: string };
    assert.equal(parsed.i, i);
    assert.equal(parsed.filler.length, i % 500 === 0 ? LOG_BUFFER.maxWrite * 3 : 1);
  });
});
