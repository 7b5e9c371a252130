import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { runInNewContext } from 'node:vm';
import { releaseStartupMemory, whenQuiet } from './process-memory.ts';

test("releaseStartupMemory gives a start-up's garbage back to the system, and leaves no global gc behind", () => {
  // What a start-up leaves: many objects, most of them garbage once it is over.
  let startup: unknown[] | undefined = Array.from({ length: 300_000 }, (_, i) => ({ i, name: `module-${i}` }));
  const before = process.memoryUsage().heapTotal;
  startup = undefined;
  const ms = releaseStartupMemory();
  assert.equal(typeof ms, 'number');
  const after = process.memoryUsage().heapTotal;
  assert.ok(after < before - 10_000_000, `the heap shrank by more than 10 MB: ${before} -> ${after}`);
  assert.equal(startup, undefined);
  assert.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined', 'the application context has no gc');
  assert.equal(runInNewContext('typeof gc'), 'undefined', 'nor does a context made afterwards');
});

/**
 * A process that keeps about 40 MB alive and allocates garbage at a steady rate, as a server under a
 * read load does, with or without limitHeapGrowth: its largest heap, in bytes.
 */
function peakHeap(limited: boolean): number {
  const module = new URL('./process-memory.ts', import.meta.url).href;
  const script = `
    import { limitHeapGrowth } from ${JSON.stringify(module)};
    if (${limited}) limitHeapGrowth();
    const live = Array.from({ length: 300_000 }, (_, i) => ({ i, s: 'live-' + i, a: [i, i + 1] }));
    let peak = 0;
    for (let round = 0; round < 400; round++) {
      const garbage = Array.from({ length: 20_000 }, (_, i) => ({ i, s: 'g-' + round + '-' + i }));
      if (round % 10 === 0) live.push(...garbage.slice(0, 1_000));
      peak = Math.max(peak, process.memoryUsage().heapTotal);
    }
    process.stdout.write(String(peak));`;
  return Number(execFileSync(process.execPath, ['--max-semi-space-size=4', '--input-type=module', '--eval', script], { encoding: 'utf8' }));
}

test('limitHeapGrowth keeps a steadily allocating heap near what it keeps alive', () => {
  const unlimited = peakHeap(false);
  const limited = peakHeap(true);
  assert.ok(limited < unlimited * 0.7, `peak heap ${Math.round(limited / 1e6)} MB limited, ${Math.round(unlimited / 1e6)} MB not`);
});

/** Keeps the event loop busy (about 95% of the time) until `until()` says stop: a server in a burst. */
async function busyUntil(until: () => boolean): Promise<void> {
  while (!until()) {
    const end = performance.now() + 20;
    while (performance.now() < end) {
      // spin: synchronous work, as requests are
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test('whenQuiet waits while the event loop is busy, and resolves in the first quiet window after', async () => {
  let quietAt: number | undefined;
  const waiting = whenQuiet({ windowMs: 50 }).then((quiet) => {
    quietAt = performance.now();
    return quiet;
  });
  // Twenty windows of work: no quiet window among them.
  const busyStart = performance.now();
  await busyUntil(() => performance.now() - busyStart > 1_000);
  const busyEnd = performance.now();
  assert.equal(quietAt, undefined, 'not quiet while busy');
  assert.equal(await waiting, true);
  assert.ok((quietAt ?? 0) - busyEnd < 500, `quiet ${Math.round((quietAt ?? 0) - busyEnd)} ms after the work ended`);
});

test('whenQuiet resolves false once its signal aborts, and at once for an aborted one', async () => {
  const stop = new AbortController();
  const waiting = whenQuiet({ windowMs: 50, signal: stop.signal });
  const busyStart = performance.now();
  await busyUntil(() => performance.now() - busyStart > 200);
  stop.abort();
  assert.equal(await waiting, false);
  assert.equal(await whenQuiet({ signal: AbortSignal.abort() }), false);
});
