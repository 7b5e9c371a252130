import Table from 'cli-table3';

/**
 * Exit codes shared by every `tenantry bootstrap` command: 0 all good, 1 findings (drift,
 * violations, a node or resolver that failed), 2 bad input (flags, files, configuration that breaks a rule),
 * 3 the cluster could not be read.
 */
export const EXIT = { ok: 0, findings: 1, badInput: 2, clusterUnreadable: 3 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure that ends a command with its exit code and one line on stderr. */
export class BootstrapError extends Error {
  readonly exitCode: ExitCode;
  constructor(message: string, exitCode: ExitCode) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** Where a command writes: stdout for the result, stderr for progress and errors (so stdout stays parseable). */
export interface Io {
  out(text: string): void;
  err(text: string): void;
  /** Progress of long work: one line per change, rewritten in place on a terminal. */
  progress(text: string): void;
  /** Ends a progress line (a terminal gets its line cleared). */
  progressDone(): void;
}

export function processIo(): Io {
  const tty = process.stderr.isTTY === true;
  let last = '';
  return {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    progress: (text) => {
      if (text === last) return;
      last = text;
      process.stderr.write(tty ? `\r${text}\u001b[K` : `${text}\n`);
    },
    progressDone: () => {
      if (tty && last !== '') process.stderr.write('\r\u001b[K');
      last = '';
    },
  };
}

/** An Io that keeps everything, for tests. */
export function memoryIo(): Io & { stdout: string; stderr: string; progressLines: string[] } {
  const io = {
    stdout: '',
    stderr: '',
    progressLines: [] as string[],
    out: (text: string) => {
      io.stdout += text;
    },
    err: (text: string) => {
      io.stderr += text;
    },
    progress: (text: string) => {
      if (io.progressLines.at(-1) !== text) io.progressLines.push(text);
    },
    progressDone: () => undefined,
  };
  return io;
}

/**
 * A table without borders, one line per row, like kubectl prints: each finding on its own line, easy to grep
 * and to compare with a golden file.
 */
export function table(head: string[], rows: string[][]): string {
  const t = new Table({
    head,
    chars: {
      top: '',
      'top-mid': '',
      'top-left': '',
      'top-right': '',
      bottom: '',
      'bottom-mid': '',
      'bottom-left': '',
      'bottom-right': '',
      left: '',
      'left-mid': '',
      mid: '',
      'mid-mid': '',
      right: '',
      'right-mid': '',
      middle: '  ',
    },
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
  });
  for (const row of rows) t.push(row);
  return `${t
    .toString()
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')}\n`;
}

export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
