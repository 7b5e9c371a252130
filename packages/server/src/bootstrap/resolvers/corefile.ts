import { parseAddress } from '../ip.ts';

/**
 * Editing the `hosts` block of a CoreDNS Corefile (the per-project resolvers' configuration), line by line so
 * that everything else in the file is kept byte for byte. Only the root zone's server blocks (`.`, `.:53`)
 * are edited: they answer the platform hostnames.
 */
export interface HostsEntry {
  address: string;
  names: string[];
}

export interface HostsEdit {
  /** Entries to add (empty when removing). */
  entries: HostsEntry[];
  /** Hostnames to take out of any existing entry first (the platform's, lower case). */
  remove: string[];
  /** `ttl` to set; undefined keeps what is there. */
  ttl?: number;
  /** The VIPs: entries still pointing at one after the edit are reported as leftovers. */
  vips: string[];
}

interface CorefileResult {
  text: string;
  changed: boolean;
  /** Root server blocks edited. */
  blocks: number;
  /** Entries left that still map a name to one of the given addresses (names the platform does not list). */
  leftovers: HostsEntry[];
}

export class CorefileError extends Error {}

/** Written above the entries this command manages; recognised and replaced on the next run. */
const MARKER = '# platform endpoints: managed by tenantry bootstrap resolvers';

interface Line {
  text: string;
  /** Tokens outside comments. */
  tokens: string[];
  indent: string;
}

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  let current = '';
  let quoted = false;
  for (const char of text) {
    if (quoted) {
      current += char;
      if (char === '"') quoted = false;
      continue;
    }
    if (char === '#') break;
    if (char === '"') {
      quoted = true;
      current += char;
    } else if (/\s/.test(char) || char === '{' || char === '}') {
      if (current) tokens.push(current);
      current = '';
      if (char === '{' || char === '}') tokens.push(char);
    } else current += char;
  }
  if (current) tokens.push(current);
  return tokens;
}

function depthChange(tokens: string[]): number {
  return tokens.filter((t) => t === '{').length - tokens.filter((t) => t === '}').length;
}

const ROOT_ZONE = /^(dns:\/\/)?\.(:\d+)?$/;

/** Renders the new body of a hosts block from its old body lines. */
function renderBody(body: Line[], edit: HostsEdit, indent: string, leftovers: HostsEntry[], watch: Set<string>): string[] {
  const drop = new Set(edit.remove.map((n) => n.toLowerCase()));
  const kept: string[] = [];
  const options: string[] = [];
  let ttl: string | undefined;
  let fallthrough: string | undefined;
  for (const line of body) {
    if (line.text.trim() === MARKER) continue;
    const [first, ...rest] = line.tokens;
    if (first === undefined) {
      if (line.text.trim() !== '') kept.push(line.text);
      continue;
    }
    if (first === 'ttl') ttl = line.text.trim();
    else if (first === 'fallthrough') fallthrough = line.text.trim();
    else if (['reload', 'no_reverse'].includes(first)) options.push(line.text.trim());
    else if (parseAddress(first)) {
      const names = rest.filter((name) => !drop.has(name.toLowerCase()));
      if (names.length === 0) continue;
      if (watch.has(first)) leftovers.push({ address: first, names });
      kept.push(names.length === rest.length ? line.text.trimEnd() : `${line.indent}${first} ${names.join(' ')}`);
    } else
      throw new CorefileError(
        `cannot read "${line.text.trim()}" in a hosts block: expected an entry, ttl, reload, no_reverse or fallthrough`,
      );
  }
  const out = [...kept];
  if (edit.entries.length > 0) {
    out.push(`${indent}${MARKER}`);
    for (const entry of edit.entries) out.push(`${indent}${entry.address} ${entry.names.join(' ')}`);
  }
  for (const option of options) out.push(`${indent}${option}`);
  if (edit.ttl !== undefined) out.push(`${indent}ttl ${edit.ttl}`);
  else if (ttl) out.push(`${indent}${ttl}`);
  out.push(`${indent}${fallthrough ?? 'fallthrough'}`);
  return out;
}

/**
 * Applies the edit to every root server block: an existing `hosts` block is rewritten (other entries and
 * options kept, platform names taken out, the given entries added under the marker, `ttl`, and `fallthrough`
 * last); a `hosts` line without a block becomes one; a server block without `hosts` gets one before its
 * `kubernetes` or `forward` directive.
 */
export function editCorefile(corefile: string, edit: HostsEdit): CorefileResult {
  const lines: Line[] = corefile.split('\n').map((text) => ({ text, tokens: tokenize(text), indent: /^\s*/.exec(text)?.[0] ?? '' }));
  const out: string[] = [];
  const leftovers: HostsEntry[] = [];
  const watch = new Set(edit.vips);
  let blocks = 0;
  let i = 0;
  while (i < lines.length) {
    const line = lines[i] as Line;
    const open = line.tokens.indexOf('{');
    const keys = open >= 0 ? line.tokens.slice(0, open) : [];
    if (open < 0 || !keys.some((k) => ROOT_ZONE.test(k)) || depthChange(line.tokens) !== 1) {
      out.push(line.text);
      i++;
      continue;
    }
    // A root server block: lines[i] opens it; find its end and its hosts directive.
    blocks++;
    out.push(line.text);
    let depth = 1;
    let j = i + 1;
    const inner: number[] = [];
    while (j < lines.length && depth > 0) {
      const change = depthChange((lines[j] as Line).tokens);
      if (depth + change <= 0) break;
      inner.push(j);
      depth += change;
      j++;
    }
    if (j >= lines.length) throw new CorefileError(`the server block opened on line ${i + 1} is not closed`);
    const directives = inner.filter((k) => {
      let d = 1;
      for (let m = i + 1; m < k; m++) d += depthChange((lines[m] as Line).tokens);
      return d === 1 && (lines[k] as Line).tokens.length > 0;
    });
    const unit = directives.length > 0 ? (lines[directives[0] as number] as Line).indent : `${line.indent}    `;
    const step = unit.length > line.indent.length ? unit.slice(line.indent.length) : '    ';
    const hostsAt = directives.find((k) => (lines[k] as Line).tokens[0] === 'hosts');
    let k = i + 1;
    const emitBlock = (header: string, body: Line[], indent: string) => {
      out.push(header);
      out.push(...renderBody(body, edit, indent + step, leftovers, watch));
      out.push(`${indent}}`);
    };
    if (hostsAt === undefined) {
      const before = directives.find((d) => ['kubernetes', 'forward'].includes((lines[d] as Line).tokens[0] ?? '')) ?? j;
      for (; k < before; k++) out.push((lines[k] as Line).text);
      emitBlock(`${unit}hosts {`, [], unit);
    } else {
      for (; k < hostsAt; k++) out.push((lines[k] as Line).text);
      const hostsLine = lines[hostsAt] as Line;
      const tokens = hostsLine.tokens;
      const args = tokens.slice(1, tokens.includes('{') ? tokens.indexOf('{') : undefined);
      const header = `${hostsLine.indent}${['hosts', ...args].join(' ')} {`;
      if (!tokens.includes('{')) {
        emitBlock(header, [], hostsLine.indent);
        k = hostsAt + 1;
      } else {
        if (tokens.indexOf('{') !== tokens.length - 1)
          throw new CorefileError(`line ${hostsAt + 1}: write the hosts block with one entry per line ("${hostsLine.text.trim()}")`);
        let end = hostsAt + 1;
        while (end < j && !((lines[end] as Line).tokens.length === 1 && (lines[end] as Line).tokens[0] === '}')) {
          if ((lines[end] as Line).tokens.some((t) => t === '{' || t === '}'))
            throw new CorefileError(`line ${end + 1}: unexpected brace inside the hosts block`);
          end++;
        }
        if (end >= j) throw new CorefileError(`the hosts block on line ${hostsAt + 1} is not closed`);
        emitBlock(header, lines.slice(hostsAt + 1, end), hostsLine.indent);
        k = end + 1;
      }
    }
    for (; k <= j; k++) out.push((lines[k] as Line).text);
    i = j + 1;
  }
  if (blocks === 0) throw new CorefileError('no server block for the root zone (".:53 {")');
  const text = out.join('\n');
  return { text, changed: text !== corefile, blocks, leftovers };
}
