import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { badEntries, MAX_CATALOGUE_BYTES, parseCatalogue } from '../images/validate.ts';
import { CliError } from './operator-client.ts';
import { column, printRows } from './output.ts';

/**
 * `tenantry images validate <file>`: checks an `images.yaml` the way the server will, offline. Prints every
 * problem (entry by index and name, field, line, why), a table by default and one JSON document with
 * `--json`; exits 1 when the server would refuse the file, 2 when it cannot be read.
 */
export function registerImageCommands(program: Command): void {
  const images = program.command('images').description('the OS image catalogue offered by the console');
  images
    .command('validate <file>')
    .description('check an images.yaml (the images-configmap key): every bad entry and field; exit 1 if any')
    .option('--json', 'print one JSON document (for CI)')
    .option('--strict', 'warnings (unknown keys, empty fields) fail too')
    .action(async (file: string, flags: { json?: boolean; strict?: boolean }) => {
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (error) {
        throw new CliError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, 2);
      }
      if (Buffer.byteLength(text) > MAX_CATALOGUE_BYTES)
        throw new CliError(`${file} is larger than ${MAX_CATALOGUE_BYTES} bytes, the most a ConfigMap holds`, 1);
      const report = parseCatalogue(text);
      const bad = badEntries(report);
      const warnings = report.warnings.length + report.reports.reduce((n, r) => n + r.warnings.length, 0);
      const rows = [
        ...report.errors.map((e) => ({
          entry: '-',
          name: '-',
          severity: 'error',
          field: e.field || '-',
          line: e.line,
          problem: e.message,
        })),
        ...report.warnings.map((w) => ({
          entry: '-',
          name: '-',
          severity: 'warning',
          field: w.field || '-',
          line: w.line,
          problem: w.message,
        })),
        ...report.reports.flatMap((r) => [
          ...r.problems.map((p) => ({
            entry: r.index,
            name: r.name,
            severity: 'error',
            field: p.field || '-',
            line: p.line,
            problem: p.message,
          })),
          ...r.warnings.map((w) => ({
            entry: r.index,
            name: r.name,
            severity: 'warning',
            field: w.field,
            line: w.line,
            problem: w.message,
          })),
        ]),
      ];
      const summary = {
        file,
        valid: report.valid,
        entries: report.entries,
        good: report.images.length,
        bad: bad.length,
        errors: report.errors,
        warnings: report.warnings,
        reports: report.reports,
      };
      if (flags.json || rows.length > 0) {
        printRows(
          flags.json === true,
          summary,
          [
            column('ENTRY', 'entry'),
            column('OS_NAME', 'name'),
            column('SEVERITY', 'severity'),
            column('FIELD', 'field'),
            column('LINE', 'line'),
            column('PROBLEM', 'problem'),
          ],
          rows,
        );
      }
      const counts = `${report.entries} ${report.entries === 1 ? 'entry' : 'entries'}, ${report.images.length} good, ${bad.length} bad, ${warnings} ${warnings === 1 ? 'warning' : 'warnings'}`;
      if (!report.valid) {
        throw new CliError(
          report.errors.length > 0
            ? `${file} is not a catalogue: ${report.errors[0]?.message}`
            : `${file}: ${counts}; the server keeps its last good catalogue instead`,
          1,
        );
      }
      if (flags.strict && warnings > 0) throw new CliError(`${file}: ${counts} (--strict)`, 1);
      if (!flags.json) process.stdout.write(`${file}: ${counts}\n`);
    });
}
