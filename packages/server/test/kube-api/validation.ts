import { validateBuiltIn } from './builtin-validation.ts';
import { errors, KubeApiError } from './errors.ts';
import { errorString, type FieldError, fieldError, goQuote, invalidError } from './field-errors.ts';
import { finalizerWarnings, validateObjectMeta, validateObjectMetaUpdate } from './object-meta.ts';
import type { PatchType } from './patch.ts';
import type { ResourceType } from './registry.ts';
import { validateRules } from './schema-cel.ts';
import { applySchemaDefaults, dropNulls, prune, pruneMetadata, undeclaredFields, validateListTypes } from './schema-structural.ts';
import { isObject, type JsonSchema, validateSchema } from './schema-validate.ts';
import type { KubeObject, WriteContext } from './store.ts';

/**
 * The checks of a write, in the API server's order: decoding (unknown fields pruned and reported as
 * `fieldValidation` asks, nulls dropped, schema defaults filled in), then validation (metadata, the CRD
 * schema with ratcheting on update, list types, CEL rules; built-in kinds through their own rules), each
 * failure as the Status the server answers.
 */

/** Decodes a request body for `type` (mutating it) and answers the unknown fields it dropped. */
export function decode(type: ResourceType, object: KubeObject): string[] {
  const unknown = pruneMetadata(object as Record<string, unknown>);
  const schema = type.schema;
  if (!schema) return unknown;
  if (!schema['x-kubernetes-preserve-unknown-fields']) unknown.push(...prune(object as Record<string, unknown>, schema));
  dropNulls(object, schema);
  applySchemaDefaults(object, schema);
  return unknown;
}

/** Go's json.Marshal of an unstructured object: keys sorted, HTML characters escaped. */
function goJson(value: unknown): string {
  const sorted = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sorted)
      : isObject(v)
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sorted(v[k])]),
          )
        : v;
  return JSON.stringify(sorted(value)).replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
}

/**
 * What unknown fields earn (k8s.io/apiserver/pkg/endpoints/handlers create.go, update.go, patch.go):
 * `Strict` refuses the write, a create or update with 400 `... cannot be handled as a <Kind>: strict
 * decoding error: unknown field "spec.x"`, a patch with 422 naming the patched object; `Warn` (the
 * default) sends each as a Warning header; `Ignore` and in-process writes drop them silently.
 */
export function reportUnknownFields(type: ResourceType, paths: string[], context: WriteContext | undefined, patched?: KubeObject): void {
  if (paths.length === 0 || !context) return;
  const messages = paths.map((p) => `unknown field ${goQuote(p)}`);
  const mode = context.fieldValidation ?? 'Warn';
  if (mode === 'Ignore') return;
  if (mode === 'Warn') {
    context.warnings?.push(...messages);
    return;
  }
  const strict = `strict decoding error: ${messages.join(', ')}`;
  if (patched) throw invalidError('', '', '', [fieldError.invalid('patch', goJson(patched), strict)]);
  throw new KubeApiError(
    400,
    'BadRequest',
    `${type.kind} in version ${goQuote(type.version)} cannot be handled as a ${type.kind}: ${strict}`,
  );
}

/** Server-side apply types its configuration against the schema first: an undeclared field fails the request (500). */
export function checkApplyConfiguration(type: ResourceType, body: unknown): void {
  const undeclared = undeclaredFields(body, type.schema);
  if (undeclared.length === 0) return;
  // The object is named as the configuration names it (structuredmerge.go objectGVKNN).
  const meta = (isObject(body) && isObject(body.metadata) ? body.metadata : {}) as { namespace?: string; name?: string };
  const gvk = `${type.group === '' ? '' : `${type.group}/`}${type.version}, Kind=${type.kind}`;
  const detail = undeclared.length === 1 ? undeclared[0] : `errors:\n  ${undeclared.join('\n  ')}`;
  throw new KubeApiError(500, '', `failed to create typed patch object (${meta.namespace ?? ''}/${meta.name ?? ''}; ${gvk}): ${detail}`);
}

/** Schema errors that keep CEL rules from running (hasBlockingErr). */
const BLOCKING = new Set([
  'FieldValueNotSupported',
  'FieldValueRequired',
  'FieldValueTooLong',
  'FieldValueTooMany',
  'FieldValueTypeInvalid',
]);

const RULES = new WeakMap<JsonSchema, boolean>();

/** Whether a schema has `x-kubernetes-validations` anywhere: without, the server builds no CEL validator at all. */
function hasRules(schema: JsonSchema | undefined): boolean {
  if (!schema) return false;
  let found = RULES.get(schema);
  if (found === undefined) {
    const extra = isObject(schema.additionalProperties) ? (schema.additionalProperties as JsonSchema) : undefined;
    found =
      (schema['x-kubernetes-validations']?.length ?? 0) > 0 ||
      hasRules(schema.items) ||
      hasRules(extra) ||
      Object.values(schema.properties ?? {}).some(hasRules);
    RULES.set(schema, found);
  }
  return found;
}

function withRules(
  schema: JsonSchema,
  object: KubeObject,
  old: KubeObject | undefined,
  errors: FieldError[],
  context: WriteContext | undefined,
): void {
  if (!hasRules(schema)) return;
  if (errors.some((e) => BLOCKING.has(e.type))) {
    errors.push(
      fieldError.invalid(
        '<nil>',
        null,
        'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
      ),
    );
    return;
  }
  const rules = validateRules(schema, object, old ? { value: old } : undefined);
  errors.push(...rules.errors);
  context?.warnings?.push(...rules.warnings.map(errorString));
}

function fail(type: ResourceType, object: KubeObject, errors: FieldError[]): void {
  if (errors.length > 0) throw invalidError(type.kind, type.group, object.metadata.name ?? '', errors);
}

/** Validation of a new object (strategy.Validate, then the common metadata rules). */
export function validateCreate(type: ResourceType, object: KubeObject, context: WriteContext | undefined): void {
  const builtIn = validateBuiltIn(type, object, undefined);
  if (builtIn.decodeError)
    throw new KubeApiError(
      400,
      'BadRequest',
      `${type.kind} in version ${goQuote(type.version)} cannot be handled as a ${type.kind}: ${builtIn.decodeError}`,
    );
  const errors = [...validateObjectMeta(type, object), ...builtIn.errors];
  const schema = type.schema;
  if (schema) {
    errors.push(...validateSchema(schema, object), ...validateListTypes(object, schema));
    withRules(schema, object, undefined, errors, context);
    context?.warnings?.push(...finalizerWarnings(object, undefined));
  }
  fail(type, object, errors);
}

/** Validation of an update of the object or of its status, ratcheting against what is stored. */
export function validateUpdate(
  type: ResourceType,
  object: KubeObject,
  old: KubeObject,
  subresource: 'status' | undefined,
  context: WriteContext | undefined,
): void {
  const builtIn = validateBuiltIn(type, object, old);
  if (builtIn.decodeError)
    throw new KubeApiError(
      400,
      'BadRequest',
      `${type.kind} in version ${goQuote(type.version)} cannot be handled as a ${type.kind}: ${builtIn.decodeError}`,
    );
  const errors = [...validateObjectMetaUpdate(object, old), ...builtIn.errors];
  const schema = type.schema;
  if (schema) {
    if (subresource === 'status') {
      const statusSchema = schema.properties?.status;
      if (statusSchema && object.status !== undefined)
        errors.push(
          ...validateSchema(statusSchema, object.status, {
            fieldPrefix: 'status',
            ...(old.status !== undefined ? { old: { value: old.status } } : {}),
          }),
        );
      const listErrors = validateListTypes(object, schema);
      if (listErrors.length > 0 && validateListTypes(old, schema).length === 0) errors.push(...listErrors);
    } else {
      errors.push(...validateSchema(schema, object, { old: { value: old } }));
      if (validateListTypes(old, schema).length === 0) errors.push(...validateListTypes(object, schema));
      context?.warnings?.push(...finalizerWarnings(object, old));
    }
    withRules(schema, object, old, errors, context);
  }
  fail(type, object, errors);
}

/** The checks of a PUT or PATCH before its object is merged: the name and namespace on the URL, and resourceVersion. */
export function checkTarget(type: ResourceType, namespace: string | undefined, name: string, next: KubeObject, current: KubeObject): void {
  const target = { group: type.group, plural: type.plural, name };
  const given = next.metadata?.name ?? '';
  if (given !== name) throw errors.badRequest(`the name of the object (${given}) does not match the name on the URL (${name})`);
  const ns = next.metadata?.namespace;
  if (type.namespaced && ns && namespace && ns !== namespace)
    throw errors.badRequest('the namespace of the provided object does not match the namespace sent on the request');
  const version = next.metadata?.resourceVersion;
  // Custom resources allow no unconditional update (customResourceStrategy.AllowUnconditionalUpdate).
  if ((version === undefined || version === '') && type.schema)
    throw invalidError(type.plural, type.group, name, [
      fieldError.invalid('metadata.resourceVersion', 0, 'must be specified for an update'),
    ]);
  if (version !== undefined && version !== '' && version !== current.metadata.resourceVersion) throw errors.conflict(target);
}

/** Strategic merge patch needs the Go types' patch strategies, which custom resources do not have (415). */
export function checkPatchType(type: ResourceType, patchType: PatchType): void {
  if (patchType !== 'strategic' || !type.schema) return;
  throw new KubeApiError(
    415,
    'UnsupportedMediaType',
    'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
  );
}
