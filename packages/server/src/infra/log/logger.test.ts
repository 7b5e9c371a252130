import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { createLogger, flushLog, LOG_BUFFER, logStreamOf } from './logger.ts';

/** A logger writing to a file of its own (removed after the test), its destination open. */
async function fileLogger(t: TestContext) {
  const dir = mkdtempSync(join(tmpdir(), 'tenantry-log-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'out.log');
  const logger = createLogger('info', file);
  const stream = logStreamOf(logger)?.destination;
  assert.ok(stream);
  await once(stream, 'ready');
  return { file, logger, stream };
}

test('flushLog writes a quiet log at once and leaves no listener behind, even while a write is in flight', async (t) => {
  const { file, logger, stream } = await fileLogger(t);
  // One short line stays in the buffer (under LOG_BUFFER.minLength) until a flush.
  logger.info({ n: 1 }, 'quiet');
  const written = once(stream, 'write');
  const listeners = { drain: stream.listenerCount('drain'), error: stream.listenerCount('error') };
  flushLog(logger);
  // The first flush started a write; these come while it is in flight, as a busy server's do, and
  // pino's own flush (which always passes a callback) is as harmless.
  for (let i = 0; i < 20; i++) {
    logger.info({ n: i + 2 }, 'busy');
    flushLog(logger);
    logger.flush();
  }
  assert.deepEqual({ drain: stream.listenerCount('drain'), error: stream.listenerCount('error') }, listeners);
  await written;
  assert.match(readFileSync(file, 'utf8'), /"n":1,"msg":"quiet"/);
  // A flush with a callback is called back once what was logged before it is written.
  logger.info({ n: 100 }, 'last');
  await new Promise<void>((resolve, reject) => logger.flush((error) => (error ? reject(error) : resolve())));
  assert.match(readFileSync(file, 'utf8'), /"n":100,"msg":"last"/);
});

test('a busy log is written in a few large writes, not one per few lines, so it keeps up with the server', async (t) => {
  const { file, logger, stream } = await fileLogger(t);
  let writes = 0;
  stream.on('write', () => writes++);
  // What a server answering 10,000 requests logs between two turns of its event loop.
  const line = {
    api: 'partner-api',
    request_id: 'req_0123456789abcdefghij',
    method: 'GET',
    route: '/api/public/v1/auth/whoami',
    status: 200,
  };
  for (let i = 0; i < 10_000; i++) logger.info({ ...line, i }, 'request');
  await once(stream, 'drain');
  flushLog(logger);
  await once(stream, 'write');
  const written = readFileSync(file, 'utf8');
  const lines = written.trimEnd().split('\n');
  assert.equal(lines.length, 10_000);
  assert.equal((JSON.parse(lines.at(-1) ?? '{}') as { i: number }).i, 9_999);
  // Every write but the last carries a full chunk: 2 MB in at most 34 writes (at 4 KiB a write it took 525).
  assert.ok(
    writes <= Math.ceil(Buffer.byteLength(written) / LOG_BUFFER.maxWrite) + 2,
    `${writes} writes for ${Buffer.byteLength(written)} bytes`,
  );
});

test('lines wait for a batch of 32 KiB or the next flush: a moderately busy server does not write every few lines', async (t) => {
  const { file, logger, stream } = await fileLogger(t);
  // About 23 KiB of access-like lines: what a server answering 150 requests logs.
  for (let i = 0; i < 150; i++)
    logger.info({ request_id: `req_${String(i).padStart(24, '0')}`, route: '/api/public/v1/auth/whoami', i }, 'request');
  // A write started on its own (at 2 KiB pending, say) would carry only the first few lines: here
  // the flush's write carries them all.
  const first = once(stream, 'write') as Promise<[number]>;
  flushLog(logger);
  const [bytes] = await first;
  const written = readFileSync(file);
  assert.ok(written.length > 20 * 1024 && written.length < LOG_BUFFER.minLength, `${written.length} bytes logged`);
  assert.equal(bytes, written.length);
  assert.equal(written.toString('utf8').trimEnd().split('\n').length, 150);
});

/**
 * Every line reaches stdout whole and in order through the batched writes: many short
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

/**
 * A stdout nobody reads (a stalled log collector, a paused terminal) must not grow the server's memory
 * without bound: beyond `maxPending` lines are dropped, whole, and counted in a warning
 * once the reader is back.
 */
test('when stdout is not read, lines beyond the bound are dropped whole and their number logged once it is', async () => {
  const total = 20_000;
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { createLogger } = await import(${JSON.stringify(new URL('./logger.ts', import.meta.url).href)});
       const logger = createLogger('info', 1, { minLength: 2048, maxWrite: 65536, maxPending: 1024 * 1024 });
       for (let i = 0; i < ${total}; i++) logger.info({ i, filler: 'y'.repeat(100) }, 'line');
       process.stderr.write('written\\n');`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  // Read nothing until all lines were handed to the logger: about 3 MB against a 1 MB bound.
  await new Promise<void>((resolve) => {
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      if (chunk.includes('written')) resolve();
    });
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  assert.equal(await new Promise((resolve) => child.on('close', resolve)), 0);
  const lines = out
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as { i?: number; dropped_lines?: number; msg: string });
  const kept = lines.filter((line) => line.msg === 'line');
  const reports = lines.filter((line) => line.dropped_lines !== undefined);
  assert.ok(kept.length < total, `${kept.length} of ${total} lines kept: none was dropped`);
  // The lines kept are the first ones, in order; the report counts exactly the others.
  assert.deepEqual(
    kept.map((line) => line.i),
    kept.map((_, i) => i),
  );
  assert.equal(reports.length, 1);
  assert.equal(reports[0]?.dropped_lines, total - kept.length);
});
