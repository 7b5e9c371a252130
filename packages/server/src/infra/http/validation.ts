import type { ErrorObject } from 'ajv';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, FastifySchemaValidationError } from 'fastify';
import type { FieldProblem } from '../errors/catalogue.ts';
import { TEXT_PATTERN } from '../request-schemas.ts';
import type { DeferredSchemas } from './deferred-schemas.ts';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * Two validators: bodies are JSON and keep their types exactly (a "5" is not
 * an integer), while query strings and path parameters arrive as text and are
 * coerced. Neither strips unknown fields: an unknown field is an error the
 * partner should hear about, never silently dropped. Each is compiled when first
 * needed (`schemas`).
 */
export function installValidators(app: FastifyInstance, schemas: DeferredSchemas): void {
  // `discriminator`: a body that is one of several forms (`oneOf`), told apart by a tag, is checked against
  // the form its tag names, so the errors are that form's alone.
  const base = { allErrors: true, removeAdditional: false, useDefaults: true, strict: false, discriminator: true } as const;
  const bodyAjv = addFormats(new Ajv({ ...base, coerceTypes: false }));
  const textAjv = addFormats(new Ajv({ ...base, coerceTypes: 'array' }));
  app.setValidatorCompiler(({ schema, httpPart, method, url }) => {
    const coerced = httpPart !== 'body';
    const compiled = schemas.defer(`${method} ${url} ${httpPart}`, () => ({
      validate: (coerced ? textAjv : bodyAjv).compile(schema as object),
      integers: coerced ? integerFields(schema) : [],
    }));
    // Every schema but the headers' gets the text check: no route can forget it.
    const textChecked = httpPart !== 'headers';
    const check = (data: unknown): boolean => {
      const { validate, integers } = compiled();
      // Most requests send no query string: an empty part holds no text to check.
      if (!textChecked || isEmptyObject(data)) {
        const valid = validate(data);
        check.errors = validate.errors;
        return valid;
      }
      // Read before Ajv coerces the text in place (with `Number`, which also takes "0x10", "1e1" or " 5").
      const notDecimal = integers.length > 0 ? notDecimalIntegers(data as Record<string, unknown>, integers) : undefined;
      const valid = validate(data);
      const unstorable = unstorableText(data);
      let errors = validate.errors;
      if (notDecimal !== undefined) {
        const fields = new Set(notDecimal.map((error) => error.instancePath));
        errors = [...notDecimal, ...(errors ?? []).filter((error) => !fields.has(fieldOf(error.instancePath)))];
      }
      check.errors = unstorable.length > 0 ? [...(errors ?? []), ...unstorable] : errors;
      return valid && notDecimal === undefined && unstorable.length === 0;
    };
    check.errors = null as ErrorObject[] | null | undefined;
    return check;
  });
}

/** An integer as a query string or path writes it: decimal digits, with a minus sign for a negative one. */
const DECIMAL_INTEGER = /^-?[0-9]+$/;

/**
 * The fields of a query string or path schema whose value is an integer (or a list of them): JavaScript's
 * `Number`, which Ajv coerces with, also reads hexadecimal, binary, octal, exponents, a plus sign, blanks
 * around the digits and a decimal point, none of which the API's integers are written with.
 */
function integerFields(schema: unknown): string[] {
  const properties = (schema as { properties?: Record<string, unknown> } | null)?.properties;
  if (properties === undefined || properties === null) return [];
  return Object.keys(properties).filter((name) => {
    const field = properties[name] as { type?: unknown; items?: { type?: unknown } } | undefined;
    return isInteger(field?.type) || (field?.type === 'array' && isInteger(field.items?.type));
  });
}

function isInteger(type: unknown): boolean {
  return type === 'integer' || (Array.isArray(type) && type.includes('integer') && !type.includes('string'));
}

/** A validation error for each integer field whose text is not written in decimal digits; undefined when none. */
function notDecimalIntegers(data: Record<string, unknown>, fields: string[]): ErrorObject[] | undefined {
  const found: ErrorObject[] = [];
  for (const field of fields) {
    if (!Object.hasOwn(data, field)) continue;
    const value = data[field];
    const texts = Array.isArray(value) ? value : [value];
    if (texts.every((text) => typeof text !== 'string' || DECIMAL_INTEGER.test(text))) continue;
    const instancePath = `/${field.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    found.push({ keyword: 'type', instancePath, schemaPath: '#', params: {}, message: 'must be an integer written in decimal digits' });
  }
  return found.length > 0 ? found : undefined;
}

/** The top-level field an error's path is in (`/limit/0` is in `/limit`). */
function fieldOf(instancePath: string): string {
  const end = instancePath.indexOf('/', 1);
  return end === -1 ? instancePath : instancePath.slice(0, end);
}

/** An object with no own enumerable field (a query string that was not sent). */
function isEmptyObject(data: unknown): boolean {
  if (data === null || typeof data !== 'object') return false;
  for (const key in data) if (Object.hasOwn(data, key)) return false;
  return true;
}

/** In a `u` regular expression a surrogate pair is one code point: only a lone surrogate is of category Cs. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Why PostgreSQL cannot store a text as given, or undefined when it can. */
function textProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  // A lone surrogate has no UTF-8 encoding: the driver would store a replacement character instead.
  if (LONE_SURROGATE.test(text)) return 'must be valid Unicode text (it holds a lone surrogate)';
  return undefined;
}

/**
 * Every string (and object key) of a request part that PostgreSQL's text cannot hold, as
 * validation errors at their paths. Iterative, so no nesting depth can exhaust the stack.
 */
export function unstorableText(value: unknown): ErrorObject[] {
  const found: ErrorObject[] = [];
  const pending: [unknown, string][] = [[value, '']];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    const [node, path] = item;
    if (typeof node === 'string') {
      const problem = textProblem(node);
      if (problem) found.push(textError(path, problem));
    } else if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) pending.push([node[i], `${path}/${i}`]);
    } else if (node !== null && typeof node === 'object') {
      for (const [key, child] of Object.entries(node)) {
        const childPath = `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
        const problem = textProblem(key);
        if (problem) found.push(textError(childPath, `field name ${problem}`));
        pending.push([child, childPath]);
      }
    }
  }
  return found.sort((a, b) => (a.instancePath < b.instancePath ? -1 : 1));
}

function textError(instancePath: string, message: string): ErrorObject {
  return { keyword: 'text', instancePath, schemaPath: '#', params: {}, message };
}

const PART: Record<string, FieldProblem['in']> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

/** Turns ajv's findings into the `details.errors` a person can act on. */
export function toFieldProblems(
  errors: readonly (FastifySchemaValidationError | ErrorObject)[],
  context: string | undefined,
): FieldProblem[] {
  const where = PART[context ?? 'body'] ?? 'body';
  // A union of literals fails once per branch plus once as `anyOf`: report it
  // once, as the list of allowed values.
  const unionPaths = new Set(errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath ?? ''));
  const problems: FieldProblem[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const path = error.instancePath ?? '';
    const params = (error.params ?? {}) as Record<string, unknown>;
    let problem: FieldProblem;
    if (unionPaths.has(path) && error.keyword !== 'anyOf') continue;
    // The text check below names NUL in words; the pattern that documents it would say it again in a regex.
    if (error.keyword === 'pattern' && params.pattern === TEXT_PATTERN) continue;
    // A key's own failures (its pattern) come with `propertyName`; the key is reported once, below.
    if ((error as ErrorObject).propertyName !== undefined) continue;
    if (error.keyword === 'propertyNames') {
      problem = { in: where, field: join(pointerToPath(path), String(params.propertyName)), message: 'is not a valid name here' };
    } else if (error.keyword === 'discriminator') {
      const tagValue = params.tagValue;
      const message =
        tagValue === undefined ? 'is required' : params.error === 'tag' ? 'must be a string' : 'is not one of the allowed values';
      problem = { in: where, field: join(pointerToPath(path), String(params.tag)), message };
    } else if (error.keyword === 'anyOf') {
      const allowed = errors
        .filter((e) => e.instancePath === path && e.keyword === 'const')
        .map((e) => (e.params as { allowedValue?: unknown }).allowedValue);
      const message = allowed.length > 0 ? `must be one of: ${allowed.join(', ')}` : 'does not match any allowed form';
      problem = { in: where, field: pointerToPath(path), message };
    } else if (error.keyword === 'required') {
      problem = { in: where, field: join(pointerToPath(path), String(params.missingProperty)), message: 'is required' };
    } else if (error.keyword === 'additionalProperties') {
      problem = { in: where, field: join(pointerToPath(path), String(params.additionalProperty)), message: 'is not a known field' };
    } else if (error.keyword === 'enum' && Array.isArray(params.allowedValues)) {
      problem = { in: where, field: pointerToPath(path), message: `must be one of: ${params.allowedValues.join(', ')}` };
    } else {
      problem = { in: where, field: pointerToPath(path), message: error.message ?? 'is invalid' };
    }
    const key = `${problem.field}\u0000${problem.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    problems.push(problem);
  }
  return problems;
}

function pointerToPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
}

const join = (base: string, field: string): string => (base ? `${base}.${field}` : field);

/**
 * A route-level `preValidation` hook for bodies that are optional as a whole
 * (`POST /customers/{id}/resume` with no body is `{}`): a missing body is
 * validated as an empty object, while a present one, `null` included, is
 * validated as sent. The OpenAPI document marks these routes' bodies optional.
 */
export function emptyBodyIsObject(request: { body: unknown }, _reply: unknown, done: () => void): void {
  if (request.body === undefined) request.body = {};
  done();
}
