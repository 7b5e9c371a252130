import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import type { Result } from '../bench/common.ts';
import { BEGIN, END, markdownReport, type RunFacts, replaceReport } from '../bench/report.ts';

const facts: RunFacts = {
  date: '2026-12-07 14:00',
  revision: 'abc1234',
  node: 'v24.21.0',
  cores: 2,
  cpu: 'Test CPU',
  loadAtStart: '0.10, 0.20, 0.30',
  settings: '32 connections, 8 s rounds, median of 3',
};
const result = (name: string, rps: number, cpuUs: number): Result => ({
  name,
  rps,
  p50: 1,
  p99: 2,
  non2xx: 0,
  cpuUs,
  rssMb: 100,
  threadsUs: { main: cpuUs, v8: 0, other: 0 },
});

describe('the bench report in docs/performance.md', () => {
  test('a row shows its ratio to its floor and whether it meets its goal', () => {
    const bare = result('PGlite: bare node:http', 10_000, 20);
    const report = markdownReport(
      [
        { result: bare },
        { result: result('PGlite: GET /auth/whoami', 6_500, 30), floor: bare, goal: 0.6 },
        { result: result('PGlite: GET /customers/{id}', 5_000, 40), floor: bare, goal: 0.9 },
      ],
      ['webhook deliveries: 2,500 a second', ''],
      facts,
    );
    assert.match(report, /at `abc1234`, Node v24\.21\.0, 2 cores \(Test CPU\)/);
    assert.match(report, /\| PGlite: GET \/auth\/whoami \| 6500 \| .* \| bare node:http 10000\/s \| 0\.65 \| 0\.67 \| ≥ 0\.6 ✓ \|/);
    assert.match(report, /\| PGlite: GET \/customers\/\{id\} \| 5000 \| .* \| 0\.50 \| 0\.50 \| ≥ 0\.9 ✗ \|/);
    assert.match(report, /^- webhook deliveries: 2,500 a second$/m);
    assert.doesNotMatch(report, /^- $/m, 'empty note lines are left out');
  });

  test('the run replaces only what stands between the markers', () => {
    const before = `# Title\n\n${BEGIN}\nold table\n${END}\n\nafter\n`;
    const after = replaceReport(before, 'new table\n');
    assert.equal(after, `# Title\n\n${BEGIN}\nnew table\n${END}\n\nafter\n`);
    assert.throws(() => replaceReport('# no markers\n', 'x'), /no "<!-- bench:begin/);
    assert.throws(() => replaceReport(`${END}\n${BEGIN}\n`, 'x'), /no "<!-- bench:begin/);
  });

  test('docs/performance.md has the markers the bench writes between', () => {
    const text = readFileSync(new URL('../../../docs/performance.md', import.meta.url), 'utf8');
    assert.ok(text.indexOf(BEGIN) >= 0 && text.indexOf(END) > text.indexOf(BEGIN));
  });
});
