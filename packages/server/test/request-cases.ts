import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/**
 * Requests built from the committed OpenAPI document alone, for the check that the server enforces what
 * the document says about requests (request-rules.test.ts). For a schema it makes the smallest value the
 * document accepts, and values the document refuses, each for one reason: a missing required field, a
 * wrong type, a value outside a list, a pattern, a length or a range, an unknown field or key. Every
 * value is first judged by the document itself (Ajv, with the document's schemas), so a case the
 * generator gets wrong fails as such instead of testing the server against a wrong expectation.
 */

export interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  propertyNames?: Schema;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  $ref?: string;
  anyOf?: Schema[];
  oneOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  default?: unknown;
  examples?: unknown[];
}
export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Schema;
}
export interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
}
export interface Document {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

export const DOCUMENT = JSON.parse(readFileSync(fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url)), 'utf8')) as Document;

/** One value for a part of a request: where it sits, whether the document accepts it, and why not. */
export interface Case<T = unknown> {
  value: T;
  /** The dotted path of the field the document refuses ('' for the whole part); undefined when valid. */
  field?: string;
  why: string;
}

const SCHEMA_BASE = 'https://tenantry.invalid/schemas/';
const absolute = (schema: unknown): object =>
  JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${SCHEMA_BASE}`)) as object;
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
for (const [name, schema] of Object.entries(DOCUMENT.components.schemas))
  ajv.addSchema({ ...absolute(schema), $id: `${SCHEMA_BASE}${name}` });
const compiled = new Map<Schema, ValidateFunction>();

/** Whether the document accepts `value` for `schema`. */
export function documentAccepts(schema: Schema, value: unknown): boolean {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(absolute(schema));
    compiled.set(schema, validate);
  }
  return validate(value);
}

export const resolve = (schema: Schema): Schema =>
  schema.$ref ? resolve(DOCUMENT.components.schemas[schema.$ref.slice(schema.$ref.lastIndexOf('/') + 1)] as Schema) : schema;

const typeOf = (schema: Schema): string | undefined => {
  if (schema.type !== undefined) return Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  if (schema.properties || schema.additionalProperties !== undefined) return 'object';
  if (schema.enum) return typeof schema.enum[0];
  return undefined;
};

const yesterday = () => new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
/** Strings tried in order for a pattern; a pattern none of them matches needs `examples` in its schema. */
const PATTERN_CANDIDATES = () => ['abc', 'PROVISIONING_FAILED', 'Abc', yesterday(), `op_${'0'.repeat(26)}`, `dlv_${'0'.repeat(26)}`];
/** Strings tried in order to break a pattern. */
const PATTERN_BREAKERS = ['Not A Name!', 'x\u0000y', '-', ''];
const matches = (pattern: string, text: string) => new RegExp(pattern, 'u').test(text);

/** The smallest value the document accepts: required fields only, the first of a list, the least of a range. */
export function minimal(schema: Schema, name = ''): unknown {
  const s = resolve(schema);
  if (s.examples?.[0] !== undefined) return s.examples[0];
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  if (s.default !== undefined) return s.default;
  const choice = s.oneOf ?? s.anyOf;
  if (choice) return minimal(choice[0] as Schema, name);
  switch (typeOf(s)) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const key of s.required ?? []) out[key] = minimal(s.properties?.[key] as Schema, key);
      return out;
    }
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => minimal(s.items as Schema));
    case 'integer':
    case 'number':
      return s.minimum ?? Math.min(1, s.maximum ?? 1);
    case 'boolean':
      return true;
    default:
      return minimalString(s, name);
  }
}

function minimalString(s: Schema, name: string): string {
  if (s.format === 'email') return 'user@example.com';
  if (s.format === 'date-time') return new Date().toISOString();
  if (s.format === 'date') return yesterday();
  const fits = (text: string) => text.length >= (s.minLength ?? 0) && text.length <= (s.maxLength ?? Infinity);
  if (s.pattern) {
    const found = PATTERN_CANDIDATES().find((text) => fits(text) && matches(s.pattern as string, text));
    if (found === undefined) throw new Error(`no value for ${name} matches ${s.pattern}: give its schema \`examples\``);
    return found;
  }
  return 'a'.repeat(Math.max(1, s.minLength ?? 1));
}

/**
 * Values of `schema` the document refuses, each for one reason of this schema's own (nested fields have
 * theirs from `objectCases`). `textual`: the value travels as text (a query string, a path, a form), so
 * a string's type cannot be wrong.
 */
export function refusedValues(schema: Schema, textual: boolean): { value: unknown; why: string }[] {
  const s = resolve(schema);
  const out: { value: unknown; why: string }[] = [];
  const type = typeOf(s);
  const listed = s.enum ?? (s.const !== undefined ? [s.const] : undefined) ?? s.anyOf?.map((branch) => resolve(branch).const);
  if (listed?.every((value) => value !== undefined)) out.push({ value: 'not-a-known-value', why: 'a value outside the list' });
  if (!textual || type !== 'string') {
    const wrong = type === 'string' || type === undefined ? 12345 : type === 'boolean' ? 'yes' : textual ? 'abc' : 'a string';
    if (!(textual && type === 'array')) out.push({ value: wrong, why: `not of type ${type ?? 'string'}` });
  }
  if (type === 'string') {
    if (s.pattern) {
      const breaker = PATTERN_BREAKERS.find((text) => !matches(s.pattern as string, text));
      if (breaker !== undefined) out.push({ value: breaker, why: `not matching ${s.pattern}` });
    }
    if ((s.minLength ?? 0) > 0) out.push({ value: 'a'.repeat((s.minLength ?? 1) - 1), why: `shorter than ${s.minLength}` });
    if (s.maxLength !== undefined) out.push({ value: 'a'.repeat(s.maxLength + 1), why: `longer than ${s.maxLength}` });
    if (s.format === 'email' || s.format === 'date-time' || s.format === 'date')
      out.push({ value: 'not-a-date-or-address', why: `not a ${s.format}` });
  }
  if (type === 'integer' || type === 'number') {
    if (s.minimum !== undefined) out.push({ value: s.minimum - 1, why: `below ${s.minimum}` });
    if (s.maximum !== undefined) out.push({ value: s.maximum + 1, why: `above ${s.maximum}` });
    if (type === 'integer') out.push({ value: 1.5, why: 'not an integer' });
  }
  if (type === 'array' && s.maxItems !== undefined && !textual) {
    out.push({ value: Array.from({ length: s.maxItems + 1 }, () => minimal(s.items as Schema)), why: `more than ${s.maxItems} items` });
  }
  return out;
}

const join = (path: string, key: string) => (path ? `${path}.${key}` : key);

function withValue(base: unknown, path: string[], value: unknown): unknown {
  if (path.length === 0) return value;
  const copy = structuredClone(base) as Record<string, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string, unknown>;
  const last = path.at(-1) as string;
  if (value === undefined) delete node[last];
  else node[last] = value;
  return copy;
}

/**
 * The cases of an object body built on `base` (the minimal value): with each optional field added (valid),
 * and with each field missing, refused or unknown, recursively into nested objects, keyed objects and
 * list items.
 */
export function objectCases(schema: Schema, base: unknown, path: string[] = []): Case[] {
  const s = resolve(schema);
  const cases: Case[] = [];
  const at = path.join('.');
  const value = (fieldPath: string[], v: unknown) => withValue(base, fieldPath, v);
  for (const [key, child] of Object.entries(s.properties ?? {})) {
    const fieldPath = [...path, key];
    const field = join(at, key);
    const required = (s.required ?? []).includes(key);
    const present = minimal(child, key);
    if (required) cases.push({ value: value(fieldPath, undefined), field, why: `${field} missing` });
    else cases.push({ value: value(fieldPath, present), why: `with ${field}` });
    for (const refused of refusedValues(child, false))
      cases.push({ value: value(fieldPath, refused.value), field, why: `${field} ${refused.why}` });
    const childSchema = resolve(child);
    if (typeOf(childSchema) === 'object') cases.push(...objectCases(childSchema, value(fieldPath, present), fieldPath));
    if (typeOf(childSchema) === 'array' && childSchema.items) {
      for (const refused of refusedValues(childSchema.items, false)) {
        cases.push({ value: value(fieldPath, [refused.value]), field: `${field}.0`, why: `${field}.0 ${refused.why}` });
      }
    }
  }
  if (s.additionalProperties === false) {
    cases.push({
      value: value([...path, 'unknown_field'], 1),
      field: join(at, 'unknown_field'),
      why: `unknown field in ${at || 'the body'}`,
    });
  } else if (typeof s.additionalProperties === 'object') {
    const entry = minimal(s.additionalProperties);
    const key = s.propertyNames ? (minimal(s.propertyNames) as string) : 'abc';
    cases.push({ value: value([...path, key], entry), why: `with an entry in ${at}` });
    for (const refused of refusedValues(s.additionalProperties, false)) {
      cases.push({ value: value([...path, key], refused.value), field: join(at, key), why: `${join(at, key)} ${refused.why}` });
    }
    if (s.propertyNames) {
      for (const refused of refusedValues(s.propertyNames, true).filter((r) => typeof r.value === 'string' && r.value !== '')) {
        const name = refused.value as string;
        cases.push({ value: value([...path, name], entry), field: join(at, name), why: `a key of ${at} ${refused.why}` });
      }
    }
  }
  return cases;
}
