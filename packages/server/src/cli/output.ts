import Table from 'cli-table3';

/** Prints one JSON document for scripts, or a table for people. */
export function printRows(json: boolean, value: unknown, columns: Column[], rows: Record<string, unknown>[]): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    return;
  }
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
    return;
  }
  const table = new Table({ head: columns.map((c) => c.title), style: { head: [], border: [] } });
  for (const row of rows) table.push(columns.map((c) => format(c.get(row))));
  process.stdout.write(`${table.toString()}\n`);
}

/** A single record as a two-column table of field and value. */
export function printRecord(json: boolean, value: Record<string, unknown>): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    return;
  }
  const table = new Table({ style: { head: [], border: [] } });
  for (const [key, field] of Object.entries(flatten(value))) table.push({ [key]: format(field) });
  process.stdout.write(`${table.toString()}\n`);
}

export interface Column {
  title: string;
  get: (row: Record<string, unknown>) => unknown;
}

export const column = (title: string, path: string): Column => ({
  title,
  get: (row) => path.split('.').reduce<unknown>((value, key) => (value as Record<string, unknown> | undefined)?.[key], row),
});

function flatten(value: Record<string, unknown>, prefix = ''): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (field !== null && typeof field === 'object' && !Array.isArray(field))
      Object.assign(out, flatten(field as Record<string, unknown>, name));
    else out[name] = field;
  }
  return out;
}

function format(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.join(', ');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}
