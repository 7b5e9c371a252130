import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { LimitRange } from 'kubernetes-models/v1/LimitRange';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ResourceQuota } from 'kubernetes-models/v1/ResourceQuota';
import { Secret } from 'kubernetes-models/v1/Secret';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { type FieldError, fieldError, GoText, goQuote } from './field-errors.ts';
import { isDns1123Subdomain } from './object-meta.ts';
import type { ResourceType } from './registry.ts';
import type { KubeObject } from './store.ts';

/**
 * Built-in kinds the double checks beyond metadata. Shapes come from `kubernetes-models` (validators
 * generated from Kubernetes' OpenAPI document): a value of the wrong JSON type, a malformed quantity or
 * base64 string fails as Go's decoding fails on the server (400, `... cannot be handled as a <Kind>: ...`;
 * the Go struct named in a type error is approximated by the kind). The semantic rules the server adds
 * (pkg/apis/core/validation, pkg/apis/rbac/validation) are written out here for config keys, quantities
 * that may not be negative, and role bindings.
 */
type Model = new (data: never) => { validate(): void };

const MODELS: Record<string, Model> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/ServiceAccount': ServiceAccount,
  'v1/ResourceQuota': ResourceQuota,
  'v1/LimitRange': LimitRange,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
};

interface AjvError {
  instancePath: string;
  keyword: string;
  params: { type?: string; format?: string; missingProperty?: string };
}

export interface BuiltInResult {
  /** Set when decoding the body would already fail (a 400 BadRequest). */
  decodeError?: string;
  errors: FieldError[];
}

const QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const GO_TYPES: Record<string, string> = {
  string: 'string',
  integer: 'int32',
  number: 'float64',
  boolean: 'bool',
  object: 'map[string]string',
  array: '[]string',
};

function jsonKind(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  if (typeof value === 'boolean') return 'bool';
  return typeof value;
}

function at(object: unknown, pointer: string): unknown {
  let value: unknown = object;
  for (const part of pointer.split('/').slice(1))
    value = (value as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  return value;
}

/** The first decoding failure Go would hit, from the generated validator's errors. */
function decodeFailure(kind: string, object: KubeObject, errors: AjvError[]): string | undefined {
  for (const error of errors) {
    const siblings = errors.filter((e) => e.instancePath === error.instancePath);
    const value = at(object, error.instancePath);
    if (error.keyword === 'format' && error.params.format === 'quantity') return QUANTITY_ERROR;
    if (error.keyword === 'format' && error.params.format === 'byte') {
      const text = String(value);
      const bad = text.search(/[^A-Za-z0-9+/=]/);
      return `illegal base64 data at input byte ${bad >= 0 ? bad : Math.floor(text.length / 4) * 4}`;
    }
    if (error.keyword !== 'type') continue;
    // A quantity accepts a JSON number or string; anything else fails to parse as one.
    if (siblings.some((e) => e.keyword === 'oneOf') && siblings.some((e) => e.params.type === 'number')) return QUANTITY_ERROR;
    const path = error.instancePath
      .split('/')
      .slice(1)
      .filter((p) => !/^\d+$/.test(p))
      .join('.');
    return `json: cannot unmarshal ${jsonKind(value)} into Go struct field ${kind}.${path} of type ${GO_TYPES[error.params.type ?? ''] ?? error.params.type}`;
  }
  return undefined;
}

const CONFIG_KEY = /^[-._a-zA-Z0-9]+$/;

/** IsConfigMapKey (k8s.io/apimachinery/pkg/util/validation). */
function configKeyErrors(key: string): string[] {
  const errs: string[] = [];
  if (key.length > 253) errs.push('must be no more than 253 characters');
  if (!CONFIG_KEY.test(key))
    errs.push(
      "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
    );
  if (key === '.') errs.push("must not be '.'");
  else if (key === '..') errs.push("must not be '..'");
  else if (key.startsWith('..')) errs.push("must not start with '..'");
  return errs;
}

function keysOf(object: KubeObject, field: string): string[] {
  const value = object[field];
  return value && typeof value === 'object' ? Object.keys(value) : [];
}

/** A quantity's sign, from its text (a leading minus). */
function negative(quantity: unknown): boolean {
  return String(quantity).trim().startsWith('-');
}

function bindingErrors(object: KubeObject, old: KubeObject | undefined): FieldError[] {
  const errs: FieldError[] = [];
  const roleRef = (object.roleRef ?? {}) as { apiGroup?: string; kind?: string; name?: string };
  const rbac = 'rbac.authorization.k8s.io';
  if (roleRef.apiGroup !== rbac) errs.push(fieldError.notSupported('roleRef.apiGroup', roleRef.apiGroup ?? '', [rbac]));
  const kinds = object.kind === 'RoleBinding' ? ['Role', 'ClusterRole'] : ['ClusterRole'];
  if (!kinds.includes(roleRef.kind ?? '')) errs.push(fieldError.notSupported('roleRef.kind', roleRef.kind ?? '', kinds));
  if (!roleRef.name) errs.push(fieldError.required('roleRef.name'));
  const subjects = (object.subjects ?? []) as Array<{ kind?: string; name?: string; namespace?: string; apiGroup?: string }>;
  subjects.forEach((subject, i) => {
    const path = `subjects[${i}]`;
    if (!subject.name) errs.push(fieldError.required(`${path}.name`));
    if (subject.kind === 'ServiceAccount') {
      if (subject.apiGroup) errs.push(fieldError.notSupported(`${path}.apiGroup`, subject.apiGroup, ['']));
      if (subject.name) for (const m of isDns1123Subdomain(subject.name)) errs.push(fieldError.invalid(`${path}.name`, subject.name, m));
      if (!subject.namespace && object.kind === 'ClusterRoleBinding') errs.push(fieldError.required(`${path}.namespace`));
    } else if (subject.kind === 'User' || subject.kind === 'Group') {
      if (subject.apiGroup !== rbac) errs.push(fieldError.notSupported(`${path}.apiGroup`, subject.apiGroup ?? '', [rbac]));
    } else errs.push(fieldError.notSupported(`${path}.kind`, subject.kind ?? '', ['ServiceAccount', 'User', 'Group']));
  });
  const before = old?.roleRef as typeof roleRef | undefined;
  if (before && JSON.stringify(before) !== JSON.stringify(roleRef))
    errs.push(
      fieldError.invalid(
        'roleRef',
        new GoText(
          `rbac.RoleRef{APIGroup:${goQuote(roleRef.apiGroup ?? '')}, Kind:${goQuote(roleRef.kind ?? '')}, Name:${goQuote(roleRef.name ?? '')}}`,
        ),
        'cannot change roleRef',
      ),
    );
  return errs;
}

function semanticErrors(type: ResourceType, object: KubeObject, old: KubeObject | undefined): FieldError[] {
  const errs: FieldError[] = [];
  if (type.kind === 'ConfigMap' || type.kind === 'Secret') {
    const fields = type.kind === 'ConfigMap' ? ['data', 'binaryData'] : ['data', 'stringData'];
    for (const field of fields)
      for (const key of keysOf(object, field))
        for (const m of configKeyErrors(key)) errs.push(fieldError.invalid(`${field}[${key}]`, key, m));
    if (type.kind === 'Secret' && old && (old.type ?? 'Opaque') !== (object.type ?? 'Opaque'))
      errs.push(fieldError.invalid('type', object.type ?? 'Opaque', 'field is immutable'));
  }
  if (type.kind === 'ResourceQuota') {
    const hard = ((object.spec as { hard?: Record<string, unknown> } | undefined)?.hard ?? {}) as Record<string, unknown>;
    for (const [name, q] of Object.entries(hard))
      if (negative(q)) errs.push(fieldError.invalid(`spec.hard[${name}]`, String(q), 'must be greater than or equal to 0'));
  }
  if (type.kind === 'LimitRange') {
    const limits = ((object.spec as { limits?: Array<Record<string, unknown>> } | undefined)?.limits ?? []) as Array<
      Record<string, unknown>
    >;
    limits.forEach((limit, i) => {
      for (const field of ['max', 'min', 'default', 'defaultRequest', 'maxLimitRequestRatio'])
        for (const [name, q] of Object.entries((limit[field] ?? {}) as Record<string, unknown>))
          if (negative(q))
            errs.push(fieldError.invalid(`spec.limits[${i}].${field}[${name}]`, String(q), 'must be greater than or equal to 0'));
    });
  }
  if (type.kind === 'RoleBinding' || type.kind === 'ClusterRoleBinding') errs.push(...bindingErrors(object, old));
  return errs;
}

export function validateBuiltIn(type: ResourceType, object: KubeObject, old: KubeObject | undefined): BuiltInResult {
  const Model = MODELS[`${type.group === '' ? '' : `${type.group}/`}${type.version}/${type.kind}`];
  if (!Model) return { errors: [] };
  try {
    new Model(structuredClone(object) as never).validate();
  } catch (error) {
    const list = ((error as { errors?: AjvError[] }).errors ?? []) as AjvError[];
    const decodeError = decodeFailure(type.kind, object, list);
    if (decodeError) return { decodeError, errors: [] };
  }
  return { errors: semanticErrors(type, object, old) };
}
