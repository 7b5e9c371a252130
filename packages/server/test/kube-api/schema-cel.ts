import { isDeepStrictEqual } from 'node:util';
import { CelCompileError, type CelProgram, compileCel } from './cel.ts';
import { type FieldError, fieldError } from './field-errors.ts';
import { correlateItem, isObject, type JsonSchema, type Old } from './schema-validate.ts';

/**
 * `x-kubernetes-validations` rules of a CRD schema, evaluated as apiextensions-apiserver does
 * (pkg/apiserver/schema/cel/validation.go, v0.33.0): every rule on every node that has a value, `self`
 * bound to it; a rule that reads `oldSelf` (a transition rule) only on UPDATE and only where the old
 * value correlates (object fields, map keys, items of `x-kubernetes-list-type: map` lists). A failed rule
 * is `<path>: Invalid value: "<schema type>": <message>` (or the `reason` it names); a rule that does
 * not read `oldSelf` on a node left unchanged by an update only warns (ratcheting).
 */
export interface CelValidation {
  errors: FieldError[];
  /** Errors ratcheted to warnings, as the server sends them (`<path>: <body>`). */
  warnings: FieldError[];
}

type Rule = NonNullable<JsonSchema['x-kubernetes-validations']>[number];

export function validateRules(schema: JsonSchema, value: unknown, old: Old): CelValidation {
  const result: CelValidation = { errors: [], warnings: [] };
  walk(schema, value, old, '', old !== undefined && isDeepStrictEqual(old.value, value), result, true);
  return result;
}

function child(parent: string, key: string): string {
  return parent === '' ? key : `${parent}.${key}`;
}

function walk(schema: JsonSchema, value: unknown, old: Old, path: string, unchanged: boolean, result: CelValidation, root = false): void {
  if (value === null || value === undefined) return;
  const type = root ? 'object' : (schema.type ?? '');
  const at = path === '' ? '<nil>' : path;
  for (const rule of schema['x-kubernetes-validations'] ?? []) evaluate(rule, type, value, old, path, at, unchanged, result);
  if (isObject(value)) {
    const previous = old && isObject(old.value) ? old.value : undefined;
    const correlate = (k: string): Old => (previous && k in previous ? { value: previous[k] } : undefined);
    const extra = isObject(schema.additionalProperties) ? (schema.additionalProperties as JsonSchema) : undefined;
    for (const [k, v] of Object.entries(value)) {
      const sub = schema.properties?.[k];
      const next = correlate(k);
      const same = next !== undefined && isDeepStrictEqual(next.value, v);
      if (sub) walk(sub, v, next, child(path, k), same, result);
      else if (extra) walk(extra, v, next, `${path}[${k}]`, same, result);
    }
  } else if (Array.isArray(value) && schema.items) {
    const previous = old && Array.isArray(old.value) ? (old.value as unknown[]) : undefined;
    const items = schema.items;
    value.forEach((item, i) => {
      const next = correlateItem(schema, item, previous);
      // An item that does not correlate ratchets with its list.
      const same = next === undefined ? unchanged : isDeepStrictEqual(next.value, item);
      walk(items, item, next, `${path}[${i}]`, same, result);
    });
  }
}

function ruleText(rule: Rule): string {
  return (rule.message ?? '').trim() || rule.rule.trim();
}

function evaluate(
  rule: Rule,
  type: string,
  value: unknown,
  old: Old,
  path: string,
  at: string,
  unchanged: boolean,
  result: CelValidation,
): void {
  let program: CelProgram;
  try {
    program = compileCel(rule.rule);
  } catch (error) {
    if (!(error instanceof CelCompileError)) throw error;
    result.errors.push(fieldError.invalid(at, type, `rule compile error: ${error.message}`));
    return;
  }
  const transition = program.uses('oldSelf');
  // Transition rules need an old value; with optionalOldSelf the server binds an empty optional instead (not modelled).
  if (transition && old === undefined) return;
  const outcome = program.evaluate({ self: value, ...(transition && old ? { oldSelf: old.value } : {}) });
  if (!outcome.ok) {
    const error = outcome.error.replace(/^field not found: /, 'no such key: ');
    result.errors.push(fieldError.invalid(at, type, `${error} evaluating rule: ${ruleText(rule)}`));
    return;
  }
  if (outcome.value === true) return;
  const target = rule.fieldPath ? child(path, rule.fieldPath.replace(/^\./, '')) : at;
  let detail = (rule.message ?? '').trim() || `failed rule: ${rule.rule.trim()}`;
  if (rule.messageExpression) {
    const message = compileCel(rule.messageExpression).evaluate({ self: value, ...(old ? { oldSelf: old.value } : {}) });
    if (message.ok && typeof message.value === 'string' && message.value.trim() !== '' && !/[\r\n]/.test(message.value))
      detail = message.value;
  }
  const error =
    rule.reason === 'FieldValueForbidden'
      ? fieldError.forbidden(target, detail)
      : rule.reason === 'FieldValueRequired'
        ? fieldError.required(target, detail)
        : rule.reason === 'FieldValueDuplicate'
          ? fieldError.duplicate(target, type)
          : fieldError.invalid(target, type, detail);
  (!transition && unchanged ? result.warnings : result.errors).push(error);
}
