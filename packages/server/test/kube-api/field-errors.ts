import { KubeApiError } from './errors.ts';

/**
 * Field errors as the API server reports them (k8s.io/apimachinery/pkg/util/validation/field/errors.go,
 * v0.33.0): each has a type, a field path, the bad value and a detail, and renders as
 * `<field>: <Type text>: <value as Go prints it>: <detail>`. A 422 Invalid Status lists them in
 * `details.causes` and joins them into its message (k8s.io/apimachinery/pkg/api/errors.NewInvalid).
 */
export type FieldErrorType =
  | 'FieldValueNotFound'
  | 'FieldValueRequired'
  | 'FieldValueDuplicate'
  | 'FieldValueInvalid'
  | 'FieldValueNotSupported'
  | 'FieldValueForbidden'
  | 'FieldValueTooLong'
  | 'FieldValueTooMany'
  | 'InternalError'
  | 'FieldValueTypeInvalid';

export interface FieldError {
  type: FieldErrorType;
  /** The path as field.Path prints it (`spec.items[0].name`, `metadata.labels`, `<nil>` for none). */
  field: string;
  /** The bad value; OMIT prints none. */
  value: unknown;
  detail: string;
}

/** The marker for errors that print no value (field.omitValue). */
export const OMIT = Symbol('omit');

const TYPE_TEXT: Record<FieldErrorType, string> = {
  FieldValueNotFound: 'Not found',
  FieldValueRequired: 'Required value',
  FieldValueDuplicate: 'Duplicate value',
  FieldValueInvalid: 'Invalid value',
  FieldValueNotSupported: 'Unsupported value',
  FieldValueForbidden: 'Forbidden',
  FieldValueTooLong: 'Too long',
  FieldValueTooMany: 'Too many',
  InternalError: 'Internal error',
  FieldValueTypeInvalid: 'Invalid value',
};

export const fieldError = {
  required: (field: string, detail = ''): FieldError => ({ type: 'FieldValueRequired', field, value: '', detail }),
  invalid: (field: string, value: unknown, detail: string): FieldError => ({ type: 'FieldValueInvalid', field, value, detail }),
  typeInvalid: (field: string, value: unknown, detail: string): FieldError => ({ type: 'FieldValueTypeInvalid', field, value, detail }),
  forbidden: (field: string, detail: string): FieldError => ({ type: 'FieldValueForbidden', field, value: '', detail }),
  duplicate: (field: string, value: unknown): FieldError => ({ type: 'FieldValueDuplicate', field, value, detail: '' }),
  notSupported: (field: string, value: unknown, supported: string[]): FieldError => ({
    type: 'FieldValueNotSupported',
    field,
    value,
    detail: supported.length > 0 ? `supported values: ${supported.map(goQuote).join(', ')}` : '',
  }),
  tooLong: (field: string, maxLength: number): FieldError => ({
    type: 'FieldValueTooLong',
    field,
    value: OMIT,
    detail: maxLength >= 0 ? `may not be more than ${maxLength} bytes` : 'value is too long',
  }),
  tooMany: (field: string, actual: number, max: number): FieldError => ({
    type: 'FieldValueTooMany',
    field,
    value: actual >= 0 ? actual : OMIT,
    detail: max >= 0 ? `must have at most ${max} items` : 'has too many items',
  }),
  internal: (field: string, detail: string): FieldError => ({ type: 'InternalError', field, value: null, detail }),
};

/** The error without its field (`Error.ErrorBody`): what a Status cause carries as its message. */
export function errorBody(error: FieldError): string {
  let text = TYPE_TEXT[error.type];
  const valueless = ['FieldValueRequired', 'FieldValueForbidden', 'FieldValueTooLong', 'InternalError'].includes(error.type);
  if (!valueless && error.value !== OMIT) text += `: ${goValue(error.value)}`;
  return error.detail ? `${text}: ${error.detail}` : text;
}

export function errorString(error: FieldError): string {
  return `${error.field}: ${errorBody(error)}`;
}

/** Several errors as utilerrors.NewAggregate prints them: one alone, more between brackets, duplicates once. */
export function aggregate(list: FieldError[]): string {
  const messages = [...new Set(list.map(errorString))];
  return messages.length === 1 ? (messages[0] ?? '') : `[${messages.join(', ')}]`;
}

/** `<Kind>.<group> "<name>" is invalid: ...`, 422, with one cause per error (errors.NewInvalid). */
export function invalidError(kind: string, group: string, name: string, list: FieldError[]): KubeApiError {
  const qualified = group === '' ? kind : `${kind}.${group}`;
  return new KubeApiError(422, 'Invalid', `${qualified} ${goQuote(name)} is invalid: ${aggregate(list)}`, {
    name,
    group,
    kind,
    causes: list.map((e) => ({ reason: e.type, message: errorBody(e), field: e.field })),
  });
}

const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u;
const ESCAPES: Record<number, string> = { 7: '\\a', 8: '\\b', 9: '\\t', 10: '\\n', 11: '\\v', 12: '\\f', 13: '\\r' };

/** A string as Go's strconv.Quote writes it (`%q`). */
export function goQuote(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (code >= 0x20 && code < 0x7f) out += ch;
    else if (ESCAPES[code]) out += ESCAPES[code];
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else if (PRINTABLE.test(ch)) out += ch;
    else if (code < 0x10000) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += `\\U${code.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

/** A float64 as `%v` prints it: the shortest form, exponent outside [1e-4, 1e21). */
export function goFloat(value: number): string {
  if (Number.isInteger(value) && Math.abs(value) < 1e21) return String(value);
  const exponent = value === 0 ? 0 : Math.floor(Math.log10(Math.abs(value)));
  if (exponent < -4 || exponent >= 21) {
    const [mantissa, exp] = value.toExponential().split('e');
    const e = Number(exp);
    return `${mantissa}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  return String(value);
}

/**
 * A bad value as `ErrorBody` prints it: numbers and booleans with `%v`, strings with `%q`, maps and lists
 * with `%#v` of the unstructured value (`map[string]interface {}{"k":"v"}`), nothing as `"null"`.
 */
/** A value already printed as Go would print it (a typed struct's `%#v`, say). */
export class GoText {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

export function goValue(value: unknown): string {
  if (value instanceof GoText) return value.text;
  // A nil value is printed as the string "null", quoted (ErrorBody).
  if (value === null || value === undefined) return '"null"';
  if (typeof value === 'string') return goQuote(value);
  if (typeof value === 'number') return goFloat(value);
  if (typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return goSyntax(value);
}

function goSyntax(value: unknown): string {
  if (value === null || value === undefined) return 'interface {}(nil)';
  if (typeof value === 'string') return goQuote(value);
  if (typeof value === 'number') return goFloat(value);
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `[]interface {}{${value.map(goSyntax).join(', ')}}`;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `map[string]interface {}{${entries.map(([k, v]) => `${goQuote(k)}:${goSyntax(v)}`).join(', ')}}`;
}
