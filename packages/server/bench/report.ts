import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import type { Result } from './common.ts';

/** One line of the table: a path, and the floor it is compared with in the same run. */
export interface Row {
  result: Result;
  floor?: Result;
  goal?: number;
}

/** Where the bench writes its latest run in a document: everything between these two lines is replaced. */
export const BEGIN = '<!-- bench:begin (written by `npm run bench:docs`; do not edit by hand) -->';
export const END = '<!-- bench:end -->';

/** What the run ran on: figures on a shared machine mean little without it. */
export interface RunFacts {
  date: string;
  revision: string;
  node: string;
  cores: number;
  cpu: string;
  loadAtStart: string;
  settings: string;
}

export function runFacts(settings: string): RunFacts {
  let revision = 'unknown';
  try {
    revision = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    if (execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim()) revision += ' with changes';
  } catch {
    // Not a git checkout: the revision stays unknown.
  }
  return {
    date: new Date().toISOString().slice(0, 16).replace('T', ' '),
    revision,
    node: process.version,
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? 'unknown',
    loadAtStart: loadavg()
      .map((load) => load.toFixed(2))
      .join(', '),
    settings,
  };
}

const cell = (value: string | number) => String(value).replaceAll('|', '\\|');

/** The run as Markdown: what it ran on, the table of paths against their floors, and the other parts' lines. */
export function markdownReport(rows: Row[], notes: string[], facts: RunFacts): string {
  const lines = [
    `Run of ${facts.date} UTC at \`${facts.revision}\`, Node ${facts.node}, ${facts.cores} cores (${facts.cpu}),`,
    `load average at start ${facts.loadAtStart}; ${facts.settings}.`,
    '',
  ];
  if (rows.length > 0) {
    lines.push(
      '| path | req/s | p50 ms | p99 ms | CPU µs | RSS MB | floor | ratio | by CPU | goal |',
      '|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const { result: r, floor, goal } of rows) {
      const ratio = floor ? (r.rps / floor.rps).toFixed(2) : '';
      const byCpu = floor ? (floor.cpuUs / r.cpuUs).toFixed(2) : '';
      const floorName = floor ? `${floor.name.split(': ').pop()} ${floor.rps}/s` : '';
      const met = goal === undefined || !floor ? '' : Number(ratio) >= goal ? ' ✓' : ' ✗';
      lines.push(
        `| ${[r.name, r.rps, r.p50, r.p99, r.cpuUs, r.rssMb, floorName, ratio, byCpu, goal ? `≥ ${goal}${met}` : ''].map(cell).join(' | ')} |`,
      );
    }
    lines.push('');
  }
  for (const note of notes.filter((line) => line.trim() !== '')) lines.push(`- ${note.trim()}`);
  return `${lines.join('\n')}\n`;
}

/** Replaces what stands between the bench's two marker lines in `text`; refuses a text without both, in order. */
export function replaceReport(text: string, report: string): string {
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`the document has no "${BEGIN}" line followed by a "${END}" line`);
  return `${text.slice(0, begin + BEGIN.length)}\n${report}${text.slice(end)}`;
}

export function writeReport(file: string, report: string): void {
  writeFileSync(file, replaceReport(readFileSync(file, 'utf8'), report));
}
