import { isDeepStrictEqual } from 'node:util';
import { type FieldError, fieldError } from './field-errors.ts';
import { isObject, type JsonSchema } from './schema-validate.ts';

/**
 * What a structural schema does to a custom resource before it is validated, as apiextensions-apiserver
 * decodes one (pkg/apiserver/customresource_handler.go unstructuredSchemaCoercer, pkg/apiserver/schema/
 * pruning, pkg/apiserver/schema/defaulting): unknown fields are pruned (their paths are what strict field
 * validation reports), nulls of non-nullable fields without a default are dropped, defaults are filled in.
 */

/** The fields of ObjectMeta (k8s.io/apimachinery/pkg/apis/meta/v1); any other metadata field is unknown. */
const OBJECT_META = new Set([
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
]);

const META_FIELDS = new Set(['apiVersion', 'kind', 'metadata']);

/** Drops metadata fields ObjectMeta does not have; answers their paths (`metadata.foo`). */
export function pruneMetadata(object: Record<string, unknown>): string[] {
  const metadata = object.metadata;
  if (!isObject(metadata)) return [];
  const unknown = Object.keys(metadata).filter((k) => !OBJECT_META.has(k));
  for (const k of unknown) delete metadata[k];
  return unknown.sort().map((k) => `metadata.${k}`);
}

/** Removes fields the schema does not declare (pruning.PruneWithOptions); answers their paths, sorted. */
export function prune(object: Record<string, unknown>, schema: JsonSchema): string[] {
  const paths: string[] = [];
  pruneNode(object, { ...schema, 'x-kubernetes-embedded-resource': true }, '', paths);
  return paths.sort();
}

function join(parent: string, key: string): string {
  return parent === '' ? key : `${parent}.${key}`;
}

function pruneNode(value: unknown, schema: JsonSchema | undefined, path: string, paths: string[]): void {
  const preserve = schema?.['x-kubernetes-preserve-unknown-fields'] === true;
  if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (schema?.['x-kubernetes-embedded-resource'] && META_FIELDS.has(k)) continue;
      const property = schema?.properties?.[k];
      const extra = schema?.additionalProperties;
      if (property) pruneNode(v, property, join(path, k), paths);
      else if (isObject(extra)) pruneNode(v, extra as JsonSchema, join(path, k), paths);
      else if (extra === true || preserve) continue;
      else {
        if (!META_FIELDS.has(k) || path !== '') paths.push(join(path, k));
        delete value[k];
      }
    }
  } else if (Array.isArray(value))
    value.forEach((item, i) => {
      pruneNode(item, schema?.items, `${path}[${i}]`, paths);
    });
}

/** Drops null values of non-nullable fields that have no default (PruneNonNullableNullsWithoutDefaults). */
export function dropNulls(value: unknown, schema: JsonSchema | undefined): void {
  if (!schema) return;
  if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      const sub =
        schema.properties?.[k] ?? (isObject(schema.additionalProperties) ? (schema.additionalProperties as JsonSchema) : undefined);
      if (!sub) continue;
      if (v === null && sub.default === undefined && !sub.nullable) delete value[k];
      else dropNulls(v, sub);
    }
  } else if (Array.isArray(value)) for (const item of value) dropNulls(item, schema.items);
}

/** Fills in `default:` values where a field is missing (or a non-nullable null), top-down (structuraldefaulting.Default). */
export function applySchemaDefaults(value: unknown, schema: JsonSchema | undefined): void {
  if (!schema) return;
  if (isObject(value)) {
    for (const [k, sub] of Object.entries(schema.properties ?? {})) {
      if (sub.default === undefined) continue;
      if (!(k in value) || (value[k] === null && !sub.nullable)) value[k] = structuredClone(sub.default);
    }
    for (const [k, v] of Object.entries(value)) {
      const sub =
        schema.properties?.[k] ?? (isObject(schema.additionalProperties) ? (schema.additionalProperties as JsonSchema) : undefined);
      applySchemaDefaults(v, sub);
    }
  } else if (Array.isArray(value)) for (const item of value) applySchemaDefaults(item, schema.items);
}

/**
 * `x-kubernetes-list-type` invariants (pkg/apiserver/schema/listtype): a `set` holds no value twice, a
 * `map` no two items with the same keys (reported as Duplicate value with the keys, Go-printed).
 */
export function validateListTypes(value: unknown, schema: JsonSchema | undefined, path = ''): FieldError[] {
  if (!schema) return [];
  const errors: FieldError[] = [];
  if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      const sub = schema.properties?.[k];
      const extra = isObject(schema.additionalProperties) ? (schema.additionalProperties as JsonSchema) : undefined;
      if (sub) errors.push(...validateListTypes(v, sub, join(path, k)));
      else if (extra) errors.push(...validateListTypes(v, extra, `${path}[${k}]`));
    }
  } else if (Array.isArray(value)) {
    const listType = schema['x-kubernetes-list-type'];
    if (listType === 'set') {
      for (const i of duplicates(value)) errors.push(fieldError.duplicate(`${path}[${i}]`, value[i]));
    } else if (listType === 'map') {
      const bad = value.findIndex((item) => item !== null && !isObject(item));
      if (bad >= 0) return [fieldError.invalid(`${path}[${bad}]`, value[bad], 'must be an object for an array of list-type map')];
      const keyFields = schema['x-kubernetes-list-map-keys'] ?? [];
      const keys = value.map((item) => {
        const key: Record<string, unknown> = {};
        for (const k of keyFields) if (isObject(item) && k in item) key[k] = item[k];
        return key;
      });
      for (const i of duplicates(keys)) errors.push(fieldError.duplicate(`${path}[${i}]`, keys[i]));
    }
    value.forEach((item, i) => {
      errors.push(...validateListTypes(item, schema.items, `${path}[${i}]`));
    });
  }
  return errors;
}

/** Indices of the first repeat of each value seen more than once (validateListSet). */
function duplicates(values: unknown[]): number[] {
  const seen = new Map<string, number>();
  const out: number[] = [];
  values.forEach((v, i) => {
    const key = JSON.stringify(v);
    const times = seen.get(key) ?? 0;
    if (times === 1) out.push(i);
    seen.set(key, times + 1);
  });
  return out;
}

/**
 * Fields of a server-side apply configuration that the schema does not declare, as structured-merge-diff
 * reports them when it types the patch (`.spec.foo: field not declared in schema`).
 */
export function undeclaredFields(value: unknown, schema: JsonSchema | undefined, path = ''): string[] {
  if (!schema || schema['x-kubernetes-preserve-unknown-fields']) return [];
  if (isObject(value)) {
    const out: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      if (path === '' && META_FIELDS.has(k)) continue;
      const sub =
        schema.properties?.[k] ?? (isObject(schema.additionalProperties) ? (schema.additionalProperties as JsonSchema) : undefined);
      if (sub) out.push(...undeclaredFields(v, sub, `${path}.${k}`));
      else if (schema.additionalProperties !== true) out.push(`${path}.${k}: field not declared in schema`);
    }
    return out;
  }
  if (Array.isArray(value)) return value.flatMap((item, i) => undeclaredFields(item, schema.items, `${path}[${i}]`));
  return [];
}

export function sameJson(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(JSON.parse(JSON.stringify(a ?? null)), JSON.parse(JSON.stringify(b ?? null)));
}
