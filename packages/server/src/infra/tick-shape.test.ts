import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

// What V8 remembers at `process.nextTick`'s computed keys, after a process that queued ticks has been
// idle through a few full collections (decision 251). V8's own report of it (`%DebugPrint` of the
// function, with --allow-natives-syntax) names each site's state, so the child prints that.
const MODULE = new URL('./tick-shape.ts', import.meta.url).href;

function sitesAfterIdleCollections(keep: boolean): string[] {
  const script = `
    ${keep ? `const { keepTickShape } = await import(${JSON.stringify(MODULE)}); if (!keepTickShape()) throw new Error('no entry kept');` : ''}
    const noop = () => {};
    const ticks = async () => { for (let i = 0; i < 100; i++) process.nextTick(noop, i); await new Promise((r) => setImmediate(r)); };
    for (let i = 0; i < 20; i++) await ticks();
    // Idle: no tick queued through a dozen full collections (with six, this Node still held the maps in
    // about one run of six, and the test without keepTickShape failed for it).
    for (let i = 0; i < 12; i++) { gc(); await new Promise((r) => setTimeout(r, 1)); }
    for (let i = 0; i < 20; i++) await ticks();
    %DebugPrint(process.nextTick);
  `;
  const child = spawnSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  assert.equal(child.status, 0, child.stderr);
  return child.stdout.split('\n').filter((line) => line.includes('DefineKeyedOwnPropertyInLiteral'));
}

test('the queue entries of process.nextTick keep one shape through an idle spell of full collections', () => {
  const sites = sitesAfterIdleCollections(true);
  // Five sites: three computed keys and the two names after them (V8's report format is its own: if
  // it changes, this says so rather than passing on nothing).
  assert.equal(sites.length, 5, `V8 reported: ${sites.join(' | ')}`);
  assert.deepEqual(
    sites.filter((line) => !line.includes('MONOMORPHIC')),
    [],
  );
});

test('without it, this Node loses them (the reason it exists; if this fails, Node or V8 fixed it)', () => {
  const sites = sitesAfterIdleCollections(false);
  assert.ok(
    sites.some((line) => line.includes('MEGAMORPHIC')),
    `expected a megamorphic site without keepTickShape; V8 reported: ${sites.join(' | ')}`,
  );
});
