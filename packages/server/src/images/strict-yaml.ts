import { type Document, LineCounter, parseDocument } from 'yaml';

export interface YamlProblem {
  message: string;
  /** 0-based line of the text where the problem is. */
  line: number;
}

export interface StrictYaml {
  document: Document;
  lineCounter: LineCounter;
  /** The document as data (mappings as Maps); undefined when it has errors. */
  value: unknown;
  errors: YamlProblem[];
}

/**
 * YAML 1.2 (core schema: `yes` is a string, `2` a number), with duplicate keys, unresolved tags and every
 * other warning counted as errors, and aliases bounded (no billion laughs). Both `images.yaml` and
 * `#cloud-config` documents are read this way.
 */
export function parseStrictYaml(text: string): StrictYaml {
  const lineCounter = new LineCounter();
  const document = parseDocument(text, {
    version: '1.2',
    schema: 'core',
    uniqueKeys: true,
    strict: true,
    prettyErrors: false,
    lineCounter,
  });
  const errors = [...document.errors, ...document.warnings].map((problem) => ({
    message: problem.message.split('\n')[0] ?? problem.message,
    line: Math.max(0, lineCounter.linePos(problem.pos[0]).line - 1),
  }));
  let value: unknown;
  if (errors.length === 0) {
    try {
      // Maps stay Maps: a key that is itself a collection is legal YAML, not a reason to warn.
      value = document.toJS({ maxAliasCount: 100, mapAsMap: true });
    } catch (error) {
      errors.push({ message: (error as Error).message, line: 0 });
    }
  }
  return { document, lineCounter, value, errors };
}
