/**
 * A reader of Prometheus' text exposition format (version 0.0.4), written from its description and
 * sharing nothing with prom-client, so the tests read `/metrics` as a Prometheus server would.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    samples.push({ name: match[1] ?? '', labels: parseLabels(match[3] ?? ''), value: parseValue(match[4] ?? '') });
  }
  return samples;
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  const pair = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;
  while (pair.lastIndex < text.length) {
    const at = pair.lastIndex;
    const match = pair.exec(text);
    if (!match) throw new Error(`bad labels at ${at}: ${text}`);
    labels[match[1] ?? ''] = (match[2] ?? '').replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  }
  return labels;
}

/** A value as Prometheus reads it: a float, `+Inf`, `-Inf` or NaN in any case (prom-client writes `Nan`). */
function parseValue(text: string): number {
  if (text === '+Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  if (text.toLowerCase() === 'nan') return Number.NaN;
  const value = Number(text);
  if (Number.isNaN(value)) throw new Error(`not a sample value: ${text}`);
  return value;
}

/** The samples of `name` whose labels include `labels`. */
export function samplesOf(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The sum of those samples' values (0 when there is none). */
export function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samplesOf(samples, name, labels).reduce((sum, s) => sum + s.value, 0);
}
