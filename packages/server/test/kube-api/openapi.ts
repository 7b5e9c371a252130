import { createHash } from 'node:crypto';
import type { ResourceRegistry, ResourceType } from './registry.ts';
import type { JsonSchema } from './schema-validate.ts';

/**
 * The OpenAPI documents kube-apiserver publishes, built from the registry: `/openapi/v2` (Swagger 2.0)
 * and `/openapi/v3` (the discovery document: one `serverRelativeURL` per group-version) with
 * `/openapi/v3/<api|apis/group>/<version>` (OpenAPI 3.0). A custom resource carries its CRD's schema;
 * a built-in kind a minimal one (apiVersion, kind, metadata, anything else allowed).
 *
 * What clients read from them: every path operation names its kind in `x-kubernetes-group-version-kind`;
 * PATCH operations list the `fieldValidation` and `dryRun` query parameters, which is how kubectl decides
 * that the server validates fields itself (cli-runtime resource/query_param_verifier_v3.go) and so sends
 * `fieldValidation=Strict` instead of validating client-side. The PATCH request bodies offer no
 * strategic merge patch, so kubectl computes one for built-in kinds from the types compiled into it and
 * sends a JSON merge patch for custom resources (kubectl pkg/cmd/apply/patcher.go), as against a
 * cluster for a custom resource. The real server also serves v2 as protobuf, which the double cannot:
 * a client that accepts only protobuf gets 406 (kubectl then does without, see README.md).
 */

const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';

/** The schema name Kubernetes gives a kind: Go package path for built-ins, reversed group for CRDs. */
function definitionName(type: ResourceType): string {
  if (!type.schema) {
    const group = type.group === '' ? 'core' : type.group.replace(/\.k8s\.io$/, '').replace(/\./g, '');
    return `io.k8s.api.${group}.${type.version}.${type.kind}`;
  }
  return `${type.group.split('.').reverse().join('.')}.${type.version}.${type.kind}`;
}

function gvk(type: ResourceType): Record<string, string> {
  return { group: type.group, version: type.version, kind: type.kind };
}

/** A kind's schema as published: the CRD's with metadata referring to ObjectMeta, or a minimal built-in one. */
function kindSchema(type: ResourceType, ref: (name: string) => string): Record<string, unknown> {
  const base: JsonSchema = type.schema ?? { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  const properties = {
    ...(base.properties ?? {}),
    apiVersion: { type: 'string', description: 'APIVersion defines the versioned schema of this representation of an object.' },
    kind: { type: 'string', description: 'Kind is a string value representing the REST resource this object represents.' },
    metadata: { $ref: ref(OBJECT_META) },
  };
  return { ...base, type: 'object', properties, 'x-kubernetes-group-version-kind': [gvk(type)] };
}

const OBJECT_META_SCHEMA = {
  type: 'object',
  description: 'ObjectMeta is metadata that all persisted resources must have.',
  properties: Object.fromEntries(
    [
      ['name', 'string'],
      ['generateName', 'string'],
      ['namespace', 'string'],
      ['uid', 'string'],
      ['resourceVersion', 'string'],
      ['generation', 'integer'],
      ['creationTimestamp', 'string'],
      ['deletionTimestamp', 'string'],
    ].map(([name, type]) => [name, { type }]),
  ),
  'x-kubernetes-preserve-unknown-fields': true,
};

interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  action: string;
  /** Query parameters beyond the path ones. */
  query: string[];
}

const WRITE_QUERY = ['dryRun', 'fieldManager', 'fieldValidation', 'pretty'];
const PATCH_TYPES = ['application/json-patch+json', 'application/merge-patch+json', 'application/apply-patch+yaml'];

function pathsOf(type: ResourceType): Array<{ path: string; operations: Operation[] }> {
  const root = type.group === '' ? `/api/${type.version}` : `/apis/${type.group}/${type.version}`;
  const collection = `${root}${type.namespaced ? '/namespaces/{namespace}' : ''}/${type.plural}`;
  const item = `${collection}/{name}`;
  const readWrite: Operation[] = [
    { method: 'get', action: 'get', query: ['pretty'] },
    { method: 'put', action: 'put', query: WRITE_QUERY },
    { method: 'patch', action: 'patch', query: [...WRITE_QUERY, 'force'] },
  ];
  return [
    {
      path: collection,
      operations: [
        { method: 'get', action: 'list', query: ['labelSelector', 'fieldSelector', 'limit', 'continue', 'watch', 'resourceVersion'] },
        { method: 'post', action: 'post', query: WRITE_QUERY },
        { method: 'delete', action: 'deletecollection', query: ['dryRun', 'labelSelector', 'fieldSelector', 'propagationPolicy'] },
      ],
    },
    { path: item, operations: [...readWrite, { method: 'delete', action: 'delete', query: ['dryRun', 'propagationPolicy'] }] },
    ...(type.statusSubresource ? [{ path: `${item}/status`, operations: readWrite }] : []),
  ];
}

function pathParameters(path: string): string[] {
  return [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1] ?? '');
}

function operationV3(type: ResourceType, path: string, op: Operation, ref: string): Record<string, unknown> {
  const content = (schema: unknown) => ({ 'application/json': { schema }, 'application/yaml': { schema } });
  return {
    operationId: `${op.action}${type.kind}`,
    parameters: [
      ...pathParameters(path).map((name) => ({ name, in: 'path', required: true, schema: { type: 'string', uniqueItems: true } })),
      ...op.query.map((name) => ({ name, in: 'query', schema: { type: name === 'limit' ? 'integer' : 'string', uniqueItems: true } })),
    ],
    ...(op.method === 'patch'
      ? { requestBody: { required: true, content: Object.fromEntries(PATCH_TYPES.map((t) => [t, { schema: { type: 'object' } }])) } }
      : op.method === 'post' || op.method === 'put'
        ? { requestBody: { required: true, content: content({ $ref: ref }) } }
        : {}),
    responses: { '200': { description: 'OK', content: content(op.action === 'list' ? { type: 'object' } : { $ref: ref }) } },
    'x-kubernetes-action': op.action,
    'x-kubernetes-group-version-kind': gvk(type),
  };
}

/** The OpenAPI 3.0 document of one group-version, or undefined when nothing is served there. */
export function openApiV3(registry: ResourceRegistry, group: string, version: string): Record<string, unknown> | undefined {
  const types = registry.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  const ref = (name: string) => `#/components/schemas/${name}`;
  const paths: Record<string, Record<string, unknown>> = {};
  const schemas: Record<string, unknown> = { [OBJECT_META]: OBJECT_META_SCHEMA };
  for (const type of types) {
    schemas[definitionName(type)] = kindSchema(type, ref);
    for (const { path, operations } of pathsOf(type))
      paths[path] = Object.fromEntries(operations.map((op) => [op.method, operationV3(type, path, op, ref(definitionName(type)))]));
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.33.0' }, paths, components: { schemas } };
}

function hash(document: unknown): string {
  return createHash('sha512').update(JSON.stringify(document)).digest('hex').slice(0, 128).toUpperCase();
}

/** `/openapi/v3`: where each group-version's document is, with a hash that changes with it (clients cache by it). */
export function openApiV3Discovery(registry: ResourceRegistry): Record<string, unknown> {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const { group, version } of registry.groupVersions()) {
    const key = group === '' ? `api/${version}` : `apis/${group}/${version}`;
    paths[key] = { serverRelativeURL: `/openapi/v3/${key}?hash=${hash(openApiV3(registry, group, version))}` };
  }
  return { paths };
}

/** `/openapi/v2`: the Swagger 2.0 document of every group-version. */
export function openApiV2(registry: ResourceRegistry): Record<string, unknown> {
  const ref = (name: string) => `#/definitions/${name}`;
  const paths: Record<string, Record<string, unknown>> = {};
  const definitions: Record<string, unknown> = { [OBJECT_META]: OBJECT_META_SCHEMA };
  for (const type of registry.all()) {
    definitions[definitionName(type)] = kindSchema(type, ref);
    for (const { path, operations } of pathsOf(type))
      paths[path] = Object.fromEntries(
        operations.map((op) => [
          op.method,
          {
            operationId: `${op.action}${type.kind}`,
            consumes: op.method === 'patch' ? PATCH_TYPES : ['*/*'],
            produces: ['application/json', 'application/yaml'],
            parameters: [
              ...pathParameters(path).map((name) => ({ name, in: 'path', required: true, type: 'string', uniqueItems: true })),
              ...op.query.map((name) => ({ name, in: 'query', type: name === 'limit' ? 'integer' : 'string', uniqueItems: true })),
              ...(['post', 'put', 'patch'].includes(op.method)
                ? [{ name: 'body', in: 'body', required: true, schema: { type: 'object' } }]
                : []),
            ],
            responses: {
              '200': { description: 'OK', schema: op.action === 'list' ? { type: 'object' } : { $ref: ref(definitionName(type)) } },
            },
            'x-kubernetes-action': op.action,
            'x-kubernetes-group-version-kind': gvk(type),
          },
        ]),
      );
  }
  return { swagger: '2.0', info: { title: 'Kubernetes', version: 'v1.33.0' }, paths, definitions };
}

/** Whether an Accept header takes JSON (kubectl asks for v2 as protobuf only). */
export function acceptsJson(accept: string | undefined): boolean {
  if (!accept) return true;
  return accept
    .split(',')
    .map((part) => part.split(';')[0]?.trim().toLowerCase())
    .some((media) => media === 'application/json' || media === '*/*' || media === 'application/*');
}
