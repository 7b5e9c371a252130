import { isMap, isScalar, isSeq, type LineCounter, type Node, type Pair } from 'yaml';
import { FIELD_RULES, featureList, IMAGE_FIELDS, type ImageField, isWindows11, type OsImage, REQUIRED_FIELDS } from './fields.ts';
import { parseStrictYaml } from './strict-yaml.ts';

/** One problem with one field (or with the entry or document as a whole: `field` is then ""). */
export interface FieldReport {
  field: string;
  message: string;
  /** 1-based line in the file, when known. */
  line: number | null;
}

export interface EntryReport {
  /** 0-based, as in `images[3]` (yq and kubectl jsonpath count the same way). */
  index: number;
  /** OS_NAME when the entry has a usable one. */
  name: string | null;
  line: number | null;
  /** What makes the entry bad; empty for an entry that only has warnings. */
  problems: FieldReport[];
  /** What is worth knowing but does not make the entry bad: unknown keys, empty optional fields. */
  warnings: FieldReport[];
}

export interface CatalogueReport {
  /** The good entries, holding only the seed's fields. */
  images: OsImage[];
  /** How many entries the file lists. */
  entries: number;
  /** Problems with the document itself (YAML syntax, no `images` list). */
  errors: FieldReport[];
  warnings: FieldReport[];
  /** Every entry with a problem or a warning, in file order. */
  reports: EntryReport[];
  /** No document error and no bad entry: the file may replace the catalogue. */
  valid: boolean;
}

/** ConfigMaps hold at most 1 MiB; a larger file is not a catalogue. */
export const MAX_CATALOGUE_BYTES = 1024 * 1024;

/**
 * Reads `images.yaml` strictly and checks every entry against the seed's table. Never throws: every
 * problem is reported with its entry, field and line, so the CLI, the log and `/readyz` can say what
 * to fix.
 */
export function parseCatalogue(text: string): CatalogueReport {
  const report: CatalogueReport = { images: [], entries: 0, errors: [], warnings: [], reports: [], valid: false };
  if (Buffer.byteLength(text) > MAX_CATALOGUE_BYTES) {
    report.errors.push({ field: '', message: `is larger than ${MAX_CATALOGUE_BYTES} bytes, the most a ConfigMap holds`, line: null });
    return report;
  }
  const { document, lineCounter, errors } = parseStrictYaml(text);
  if (errors.length > 0) {
    report.errors.push(...errors.map((e) => ({ field: '', message: `is not valid YAML: ${e.message}`, line: e.line + 1 })));
    return report;
  }
  const lineOf = (node: Node | null | undefined): number | null => (node?.range ? lineCounter.linePos(node.range[0]).line : null);
  const root = document.contents;
  if (!isMap(root)) {
    report.errors.push({ field: '', message: 'must be a mapping with an `images:` list', line: lineOf(root) });
    return report;
  }
  let list: Node | null = null;
  let found = false;
  for (const pair of root.items as Pair<Node, Node>[]) {
    const key = isScalar(pair.key) ? String(pair.key.value) : '';
    if (key === 'images') {
      found = true;
      list = pair.value;
    } else report.warnings.push({ field: key, message: 'is not a known top-level key (only `images` is read)', line: lineOf(pair.key) });
  }
  if (!found) {
    report.errors.push({ field: 'images', message: 'is missing: the catalogue is the list under `images:`', line: lineOf(root) });
    return report;
  }
  if (!isSeq(list)) {
    report.errors.push({ field: 'images', message: 'must be a list of entries', line: lineOf(list) });
    return report;
  }
  report.entries = list.items.length;
  if (report.entries === 0)
    report.warnings.push({ field: 'images', message: 'is empty: the form will offer no operating system', line: lineOf(list) });
  const names = new Map<string, number>();
  list.items.forEach((item, index) => {
    const entry = checkEntry(item as Node, index, lineCounter);
    if (entry.image) {
      const earlier = names.get(entry.image.OS_NAME);
      if (earlier !== undefined) {
        entry.report.problems.push({
          field: 'OS_NAME',
          message: `is also the name of images[${earlier}]; names must be unique, the form tells entries apart by name`,
          line: entry.report.line,
        });
      } else names.set(entry.image.OS_NAME, index);
    }
    if (entry.report.problems.length === 0 && entry.image) report.images.push(entry.image);
    if (entry.report.problems.length > 0 || entry.report.warnings.length > 0) report.reports.push(entry.report);
  });
  report.valid = report.errors.length === 0 && report.reports.every((r) => r.problems.length === 0);
  return report;
}

/** The entries that make a catalogue bad. */
export const badEntries = (report: CatalogueReport): EntryReport[] => report.reports.filter((r) => r.problems.length > 0);

function checkEntry(node: Node, index: number, lineCounter: LineCounter): { report: EntryReport; image: OsImage | undefined } {
  const lineOf = (n: Node | null | undefined): number | null => (n?.range ? lineCounter.linePos(n.range[0]).line : null);
  const report: EntryReport = { index, name: null, line: lineOf(node), problems: [], warnings: [] };
  if (!isMap(node)) {
    report.problems.push({ field: '', message: 'must be a mapping of fields (OS_NAME: ..., CLOUD_USER: ...)', line: report.line });
    return { report, image: undefined };
  }
  const values: Partial<Record<ImageField, string>> = {};
  const lines: Partial<Record<ImageField, number | null>> = {};
  for (const pair of node.items as Pair<Node, Node>[]) {
    const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
    const line = lineOf(pair.key);
    if (!(IMAGE_FIELDS as readonly string[]).includes(key)) {
      report.warnings.push({ field: key, message: unknownKeyMessage(key), line });
      continue;
    }
    const field = key as ImageField;
    lines[field] = line;
    const value = isScalar(pair.value) ? pair.value.value : pair.value;
    if (value === null || value === undefined || value === '') {
      // An empty optional field reads as not set (Helm templates write `MIN_MEMORY: ""` for an unset value),
      // except CLOUD_INIT, whose rule refuses empty user-data.
      if (field === 'CLOUD_INIT') report.problems.push({ field, message: FIELD_RULES.CLOUD_INIT('') ?? '', line });
      else if (!(REQUIRED_FIELDS as readonly string[]).includes(field))
        report.warnings.push({ field, message: 'is empty: read as not set', line });
      continue;
    }
    if (typeof value !== 'string') {
      const hint = isScalar(pair.value) ? ` (quote it: "${String(value)}")` : '';
      report.problems.push({ field, message: `must be a string, got ${describe(value)}${hint}`, line });
      continue;
    }
    values[field] = value;
  }
  if (typeof values.OS_NAME === 'string' && FIELD_RULES.OS_NAME(values.OS_NAME) === undefined) report.name = values.OS_NAME;
  for (const field of REQUIRED_FIELDS) {
    if (values[field] === undefined && !report.problems.some((p) => p.field === field)) {
      report.problems.push({ field, message: 'is required', line: report.line });
    }
  }
  for (const field of IMAGE_FIELDS) {
    const value = values[field];
    if (value === undefined) continue;
    const problem = FIELD_RULES[field](value);
    if (problem) report.problems.push({ field, message: problem, line: lines[field] ?? report.line });
  }
  if (report.name && isWindows11(report.name)) {
    if (values.FIRMWARE_TYPE !== 'efi' && !report.problems.some((p) => p.field === 'FIRMWARE_TYPE')) {
      report.problems.push({
        field: 'FIRMWARE_TYPE',
        message: 'must be "efi": Windows 11 boots only with UEFI firmware',
        line: lines.FIRMWARE_TYPE ?? report.line,
      });
    }
    if (!featureList(values.FEATURES).includes('tpm') && !report.problems.some((p) => p.field === 'FEATURES')) {
      report.problems.push({ field: 'FEATURES', message: 'must include tpm: Windows 11 needs a TPM', line: lines.FEATURES ?? report.line });
    }
  }
  report.problems.sort((a, b) => IMAGE_FIELDS.indexOf(a.field as ImageField) - IMAGE_FIELDS.indexOf(b.field as ImageField));
  if (report.problems.length > 0) return { report, image: undefined };
  const image = {} as OsImage;
  for (const field of IMAGE_FIELDS) if (values[field] !== undefined) image[field] = values[field] as string;
  return { report, image };
}

function unknownKeyMessage(key: string): string {
  const near = IMAGE_FIELDS.find((field) => field === key.toUpperCase() || distance(field, key.toUpperCase()) <= 2);
  return `is not a field of the catalogue and is not served${near ? ` (did you mean ${near}?)` : ''}`;
}

function describe(value: unknown): string {
  if (isSeq(value)) return 'a list';
  if (isMap(value)) return 'a mapping';
  if (typeof value === 'object') return 'a structure';
  return `the ${typeof value} ${String(value)}`;
}

/** Levenshtein distance, for "did you mean" on misspelt keys. */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
