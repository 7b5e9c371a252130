import { isDeepStrictEqual } from 'node:util';
import { type FieldError, fieldError, goFloat, goQuote } from './field-errors.ts';

/** A CustomResourceDefinition's schema node (apiextensions.k8s.io/v1 JSONSchemaProps), as far as the double reads it. */
export interface JsonSchema {
  type?: string;
  format?: string;
  description?: string;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  required?: string[];
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minProperties?: number;
  maxProperties?: number;
  nullable?: boolean;
  default?: unknown;
  allOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  not?: JsonSchema;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: 'atomic' | 'granular';
  'x-kubernetes-validations'?: Array<{
    rule: string;
    message?: string;
    messageExpression?: string;
    reason?: string;
    fieldPath?: string;
    optionalOldSelf?: boolean;
  }>;
}

/** The previous value of a node on UPDATE, when it can be correlated with the new one (ratcheting). */
export type Old = { value: unknown } | undefined;

/** What kind of JSON value this is, as the OpenAPI validator classifies Go's decoded values. */
export function jsonType(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The types a node accepts: `x-kubernetes-int-or-string` is integer or string. */
function typesOf(schema: JsonSchema): string[] {
  if (schema['x-kubernetes-int-or-string']) return ['integer', 'string'];
  return schema.type ? [schema.type] : [];
}

/** Formats a structural schema keeps (apiextensions-apiserver's supported formats); others are stripped. */
const FORMATS: Record<string, (s: string) => boolean> = {
  'date-time': (s) =>
    /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})?$/.test(s) &&
    !Number.isNaN(Date.parse(s.replace(' ', 'T'))),
  datetime: (s) => FORMATS['date-time']?.(s) ?? false,
  date: (s) => /^\d{4}-\d{2}-\d{2}$/.test(s) && !Number.isNaN(Date.parse(s)),
  uuid: (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(s),
  ipv4: (s) => /^((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)$/.test(s),
  ipv6: (s) => /^[0-9a-f:.]+$/i.test(s) && s.includes(':'),
  cidr: (s) => /^[0-9a-f:.]+\/\d{1,3}$/i.test(s),
  byte: (s) => /^[A-Za-z0-9+/]*={0,2}$/.test(s) && s.length % 4 === 0,
};

const INT32 = [-2147483648, 2147483647] as const;

/**
 * Validates a value against a structural schema the way kube-openapi's SchemaValidator does for custom
 * resources (k8s.io/kube-openapi/pkg/validation/validate, errors mapped to field errors as
 * apiextensions-apiserver's kubeOpenAPIResultToFieldErrors does). `messagePath` is the validator's own
 * path (what messages say, `spec.x in body ...`); `fieldPrefix` the field path it is rooted at (`status`
 * for the status subresource, undefined for a whole object). With `old`, validation ratchets: a
 * correlated node equal to its old value is not checked again (CRDValidationRatcheting).
 */
export function validateSchema(schema: JsonSchema, value: unknown, options: { fieldPrefix?: string; old?: Old } = {}): FieldError[] {
  const out: FieldError[] = [];
  new SchemaWalk(options.fieldPrefix, out).node(schema, value, '', options.old);
  return out;
}

class SchemaWalk {
  readonly #prefix: string | undefined;
  readonly #out: FieldError[];

  constructor(prefix: string | undefined, out: FieldError[]) {
    this.#prefix = prefix;
    this.#out = out;
  }

  /** The field path of an error the validator raised at `name` (field.Path.Child of the trimmed name). */
  field(name: string): string {
    const trimmed = name.startsWith('.') ? name.slice(1) : name;
    if (this.#prefix === undefined) return trimmed === '' ? '<nil>' : trimmed;
    return trimmed === '' ? this.#prefix : `${this.#prefix}.${trimmed}`;
  }

  /** The path of an error that is no validation error of its own (reported at the root). */
  root(): string {
    return this.#prefix ?? '<nil>';
  }

  node(schema: JsonSchema, value: unknown, path: string, old: Old): void {
    if (old !== undefined && isDeepStrictEqual(old.value, value)) return;
    const type = jsonType(value);
    const types = typesOf(schema);
    if (type === 'null') {
      if (types.length > 0 && !schema.nullable) this.#typeError(path, types, 'null');
      this.#enum(schema, value, path);
      return;
    }
    const typeOk = types.length === 0 || types.includes(type) || (type === 'integer' && types.includes('number'));
    if (!typeOk) this.#typeError(path, types, type);
    this.#combinators(schema, value, path);
    if (type === 'string') this.#string(schema, value as string, path);
    if (type === 'integer' || type === 'number') this.#number(schema, value as number, path, types);
    if (type === 'array') this.#array(schema, value as unknown[], path, old);
    this.#enum(schema, value, path);
    if (type === 'object') this.#object(schema, value as Record<string, unknown>, path, old);
  }

  #typeError(path: string, types: string[], actual: string): void {
    const detail = `${path} in body must be of type ${types.join(',')}: ${goQuote(actual)}`;
    this.#out.push(fieldError.typeInvalid(this.field(path), actual, detail));
  }

  #combinators(schema: JsonSchema, value: unknown, path: string): void {
    const run = (s: JsonSchema): FieldError[] => {
      const errors: FieldError[] = [];
      new SchemaWalk(this.#prefix, errors).node(s, value, path, undefined);
      return errors;
    };
    for (const s of schema.allOf ?? []) this.#out.push(...run(s));
    if (schema.anyOf && schema.anyOf.length > 0 && !schema['x-kubernetes-int-or-string']) {
      const results = schema.anyOf.map(run);
      if (!results.some((r) => r.length === 0)) {
        this.#out.push(fieldError.invalid(this.root(), '', `${goQuote(path)} must validate at least one schema (anyOf)`));
        this.#out.push(...(results[0] ?? []));
      }
    }
    if (schema.oneOf && schema.oneOf.length > 0) {
      const valid = schema.oneOf.map(run).filter((r) => r.length === 0).length;
      if (valid !== 1) {
        const more = valid === 0 ? 'Found none valid' : `Found ${valid} valid alternatives`;
        this.#out.push(fieldError.invalid(this.root(), '', `${goQuote(path)} must validate one and only one schema (oneOf). ${more}`));
      }
    }
    if (schema.not && run(schema.not).length === 0)
      this.#out.push(fieldError.invalid(this.root(), '', `${goQuote(path)} must not validate the schema (not)`));
  }

  #string(schema: JsonSchema, value: string, path: string): void {
    const length = [...value].length;
    if (schema.maxLength !== undefined && length > schema.maxLength) this.#out.push(fieldError.tooLong(this.field(path), schema.maxLength));
    else if (schema.minLength !== undefined && length < schema.minLength)
      this.#out.push(fieldError.invalid(this.field(path), value, `${path} in body should be at least ${schema.minLength} chars long`));
    else if (schema.pattern !== undefined && !patternOf(schema.pattern).test(value))
      this.#out.push(fieldError.invalid(this.field(path), value, `${path} in body should match '${schema.pattern}'`));
    const format = schema.format ? FORMATS[schema.format] : undefined;
    if (format && !format(value))
      this.#out.push(
        fieldError.typeInvalid(this.field(path), value, `${path} in body must be of type ${schema.format}: ${goQuote(value)}`),
      );
  }

  #number(schema: JsonSchema, value: number, path: string, types: string[]): void {
    // Range of the declared format (kube-openapi numberValidator, Kubernetes 1.36 and later).
    if (types.length === 1 && types[0] === 'integer' && schema.format === 'int32' && (value < INT32[0] || value > INT32[1]))
      this.#out.push(fieldError.invalid(this.root(), '', `Checked value must be of type integer with format int32 in ${path}`));
    const bound = (b: number) => (Number.isInteger(value) ? String(Math.trunc(b)) : goFloat(b));
    if (schema.multipleOf !== undefined && schema.multipleOf !== 0 && !Number.isInteger(value / schema.multipleOf))
      this.#out.push(fieldError.invalid(this.field(path), value, `${path} in body should be a multiple of ${bound(schema.multipleOf)}`));
    if (schema.minimum !== undefined && (schema.exclusiveMinimum ? value <= schema.minimum : value < schema.minimum)) {
      const relation = schema.exclusiveMinimum ? 'greater than' : 'greater than or equal to';
      this.#out.push(fieldError.invalid(this.field(path), value, `${path} in body should be ${relation} ${bound(schema.minimum)}`));
    }
    if (schema.maximum !== undefined && (schema.exclusiveMaximum ? value >= schema.maximum : value > schema.maximum)) {
      const relation = schema.exclusiveMaximum ? 'less than' : 'less than or equal to';
      this.#out.push(fieldError.invalid(this.field(path), value, `${path} in body should be ${relation} ${bound(schema.maximum)}`));
    }
  }

  #array(schema: JsonSchema, value: unknown[], path: string, old: Old): void {
    const previous = old && Array.isArray(old.value) ? (old.value as unknown[]) : undefined;
    if (schema.items) {
      const items = schema.items;
      value.forEach((item, i) => {
        this.node(items, item, `${path}[${i}]`, correlateItem(schema, item, previous));
      });
    }
    if (schema.minItems !== undefined && value.length < schema.minItems)
      this.#out.push(fieldError.invalid(this.field(path), value.length, `${path} in body should have at least ${schema.minItems} items`));
    if (schema.maxItems !== undefined && value.length > schema.maxItems)
      this.#out.push(fieldError.tooMany(this.field(path), value.length, schema.maxItems));
    if (schema.uniqueItems && value.some((a, i) => value.slice(i + 1).some((b) => isDeepStrictEqual(a, b))))
      this.#out.push(fieldError.invalid(this.field(path), '', `${path} in body shouldn't contain duplicates`));
  }

  #enum(schema: JsonSchema, value: unknown, path: string): void {
    if (!schema.enum || schema.enum.length === 0 || schema.enum.some((e) => isDeepStrictEqual(e, value))) return;
    const supported = schema.enum.map((e) => (typeof e === 'string' ? e : JSON.stringify(e)));
    this.#out.push(fieldError.notSupported(this.field(path), value, supported));
  }

  #object(schema: JsonSchema, value: Record<string, unknown>, path: string, old: Old): void {
    const keys = Object.keys(value);
    const previous = old && isObject(old.value) ? old.value : undefined;
    const child = (k: string): Old => (previous && k in previous ? { value: previous[k] } : undefined);
    if (schema.minProperties !== undefined && keys.length < schema.minProperties)
      this.#out.push(
        fieldError.invalid(this.field(path), keys.length, `${path} in body should have at least ${schema.minProperties} properties`),
      );
    if (schema.maxProperties !== undefined && keys.length > schema.maxProperties)
      this.#out.push(fieldError.tooMany(this.field(path), keys.length, schema.maxProperties));
    const extra = schema.additionalProperties;
    if (isObject(extra))
      for (const k of keys) if (!schema.properties?.[k]) this.node(extra as JsonSchema, value[k], `${path}.${k}`, child(k));
    for (const [name, sub] of Object.entries(schema.properties ?? {}))
      if (name in value) this.node(sub, value[name], path === '' ? name : `${path}.${name}`, child(name));
    for (const k of schema.required ?? []) if (!(k in value)) this.#out.push(fieldError.required(this.field(`${path}.${k}`)));
  }
}

/** The old item a list item is correlated with: only `x-kubernetes-list-type: map` lists correlate, by their keys. */
export function correlateItem(schema: JsonSchema, item: unknown, previous: unknown[] | undefined): Old {
  const keys = schema['x-kubernetes-list-map-keys'];
  if (!previous || schema['x-kubernetes-list-type'] !== 'map' || !keys || !isObject(item)) return undefined;
  const match = previous.find((p) => isObject(p) && keys.every((k) => isDeepStrictEqual(p[k], item[k])));
  return match === undefined ? undefined : { value: match };
}

const PATTERNS = new Map<string, RegExp>();

/**
 * `\s` as Go's RE2 reads it: ASCII whitespace only ([\t\n\f\r ]), where JavaScript also takes Unicode
 * spaces. Other escapes mean the same in both for the patterns CRDs use.
 */
function re2Whitespace(pattern: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i += 1) {
    const ch = pattern[i];
    if (ch === '\\') {
      const next = pattern[i + 1] ?? '';
      if (next === 's') out += inClass ? '\\t\\n\\f\\r ' : '[\\t\\n\\f\\r ]';
      else if (next === 'S' && !inClass) out += '[^\\t\\n\\f\\r ]';
      else out += ch + next;
      i += 1;
      continue;
    }
    if (ch === '[') inClass = true;
    else if (ch === ']') inClass = false;
    out += ch;
  }
  return out;
}

/** A CRD pattern as a JavaScript RegExp (CRD patterns are ECMA-262; the server runs them with Go's RE2). */
export function patternOf(pattern: string): RegExp {
  let compiled = PATTERNS.get(pattern);
  if (!compiled) {
    const source = re2Whitespace(pattern);
    try {
      compiled = new RegExp(source, 'u');
    } catch {
      // Identity escapes such as `\_` are valid ECMA-262 only outside unicode mode.
      compiled = new RegExp(source);
    }
    PATTERNS.set(pattern, compiled);
  }
  return compiled;
}
