/**
 * A response schema as the serialiser needs it.
 *
 * fast-json-stringify writes an `anyOf` by running a validator (Ajv) against each branch in turn, for
 * every value: a nullable field (`Type.Union([Type.String(), Type.Null()])`, `anyOf: [string, null]`)
 * or a status (a union of string literals) costs a validation a value, and a nullable timestamp a
 * `date-time` regular expression as well. A page of 200 customers runs 1,600 of them, about a quarter of
 * what the page allocates. When every branch is a plain scalar, the serialiser needs only the JSON
 * types: `anyOf: [{ type: 'string', format: 'date-time' }, { type: 'null' }]` is written exactly as
 * `{ type: ['string', 'null'], format: 'date-time' }`, which fast-json-stringify writes with a `typeof`
 * test. The same text comes out (the suite compares both serialisers' output); what goes
 * is the serialiser refusing a value outside the union, which only a bug of ours could hand it, and
 * which the request's own schema tests do not rely on.
 *
 * Anything else (unions of objects or arrays, branches with different formats, `$ref`s) is kept as it
 * is. The schema given is not changed: a new one is returned where something was rewritten.
 */

type Schema = Record<string, unknown>;

const SCALAR_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
/** What a scalar branch may hold besides its type: what validates or documents, not what is written. */
const VALIDATION_ONLY = new Set([
  'const',
  'enum',
  'minLength',
  'maxLength',
  'pattern',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'title',
  'description',
  'examples',
  'default',
]);

/** Keywords whose value is one schema. */
const ONE_SCHEMA = ['additionalProperties', 'items', 'not', 'if', 'then', 'else', 'contains', 'propertyNames'];
/** Keywords whose value is a list of schemas. */
const SCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
/** Keywords whose value maps names to schemas. */
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];

export function serializationSchema<T>(schema: T): T {
  return rewrite(schema) as T;
}

function rewrite(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const schema = value as Schema;
  let out: Schema | undefined;
  const set = (key: string, next: unknown) => {
    if (next === schema[key]) return;
    out ??= { ...schema };
    out[key] = next;
  };
  for (const key of ONE_SCHEMA) if (key in schema) set(key, rewrite(schema[key]));
  for (const key of SCHEMA_LISTS) {
    const list = schema[key];
    if (!Array.isArray(list)) continue;
    const next = list.map(rewrite);
    if (next.some((item, i) => item !== list[i])) set(key, next);
  }
  for (const key of SCHEMA_MAPS) {
    const map = schema[key];
    if (typeof map !== 'object' || map === null) continue;
    let changed: Schema | undefined;
    for (const [name, sub] of Object.entries(map)) {
      const next = rewrite(sub);
      if (next !== sub) {
        changed ??= { ...(map as Schema) };
        changed[name] = next;
      }
    }
    if (changed) set(key, changed);
  }
  const current = out ?? schema;
  return scalarUnion(current) ?? current;
}

/** `anyOf` of plain scalars as one schema with a list of types; undefined when it is anything else. */
function scalarUnion(schema: Schema): Schema | undefined {
  const branches = schema.anyOf;
  if (!Array.isArray(branches) || branches.length === 0 || 'type' in schema) return undefined;
  const types: string[] = [];
  let format: unknown;
  for (const branch of branches as unknown[]) {
    if (typeof branch !== 'object' || branch === null) return undefined;
    const { type, format: branchFormat, ...rest } = branch as Schema;
    if (typeof type !== 'string' || !SCALAR_TYPES.has(type)) return undefined;
    if (Object.keys(rest).some((key) => !VALIDATION_ONLY.has(key))) return undefined;
    if (branchFormat !== undefined) {
      if (type !== 'string' || (format !== undefined && format !== branchFormat)) return undefined;
      format = branchFormat;
    }
    if (!types.includes(type)) types.push(type);
  }
  // A format on one string branch and none on another would be written differently: kept as it is.
  if (format !== undefined && branches.some((b) => (b as Schema).type === 'string' && (b as Schema).format === undefined)) return undefined;
  const { anyOf: _, ...siblings } = schema;
  return { ...siblings, type: types.length === 1 ? types[0] : types, ...(format === undefined ? {} : { format }) };
}
