import { type FieldError, fieldError, goQuote } from './field-errors.ts';
import type { ResourceType } from './registry.ts';
import type { KubeObject } from './store.ts';

/**
 * Metadata rules every kind follows (k8s.io/apimachinery/pkg/api/validation/objectmeta.go and
 * pkg/util/validation/validation.go, v0.33.0): the name rule of the kind, labels, annotations,
 * finalizers, owner references, and on update the fields that never change.
 */

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

const maxLen = (n: number) => `must be no more than ${n} characters`;

/** RegexError: the message, its examples (each followed by `', '`, joined by ` or `) and the regex. */
function regexError(message: string, format: string, ...examples: string[]): string {
  if (examples.length === 0) return `${message} (regex used for validation is '${format}')`;
  return `${message} (e.g. ${examples.map((e) => `'${e}', `).join(' or ')}regex used for validation is '${format}')`;
}

const LABEL_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const SUBDOMAIN_FMT = `${LABEL_FMT}(\\.${LABEL_FMT})*`;
const QUALIFIED_FMT = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const QUALIFIED_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

export function isDns1123Label(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push(maxLen(63));
  if (!DNS1123_LABEL.test(value))
    errs.push(
      DNS1123_SUBDOMAIN.test(value)
        ? 'must not contain dots'
        : regexError(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            LABEL_FMT,
            'my-name',
            '123-abc',
          ),
    );
  return errs;
}

export function isDns1123Subdomain(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 253) errs.push(maxLen(253));
  if (!DNS1123_SUBDOMAIN.test(value))
    errs.push(
      regexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        SUBDOMAIN_FMT,
        'example.com',
      ),
    );
  return errs;
}

function isDns1035Label(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push(maxLen(63));
  if (!DNS1035_LABEL.test(value))
    errs.push(
      regexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
        '[a-z]([-a-z0-9]*[a-z0-9])?',
        'my-name',
        'abc-123',
      ),
    );
  return errs;
}

/** Names that only have to be safe in a URL path (RBAC kinds: path.IsValidPathSegmentName). */
function isPathSegment(value: string): string[] {
  if (value === '.' || value === '..') return [`may not be '${value}'`];
  return ['/', '%'].filter((c) => value.includes(c)).map((c) => `may not contain '${c}'`);
}

export function isQualifiedName(value: string): string[] {
  const errs: string[] = [];
  const parts = value.split('/');
  if (parts.length > 2)
    return [
      `a qualified name ${regexError(QUALIFIED_MSG, QUALIFIED_FMT, 'MyName', 'my.name', '123-abc')} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  const name = parts.length === 2 ? (parts[1] ?? '') : (parts[0] ?? '');
  if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    if (prefix === '') errs.push('prefix part must be non-empty');
    else errs.push(...isDns1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  }
  if (name === '') errs.push('name part must be non-empty');
  else if (name.length > 63) errs.push(`name part ${maxLen(63)}`);
  if (!QUALIFIED_NAME.test(name)) errs.push(`name part ${regexError(QUALIFIED_MSG, QUALIFIED_FMT, 'MyName', 'my.name', '123-abc')}`);
  return errs;
}

function isLabelValue(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push(maxLen(63));
  if (!LABEL_VALUE.test(value))
    errs.push(
      regexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        `(${QUALIFIED_FMT})?`,
        'MyValue',
        'my_value',
        '12345',
      ),
    );
  return errs;
}

type NameRule = (name: string) => string[];

/** The name rule of a kind: most are DNS-1123 subdomains; Namespaces labels; Services DNS-1035 labels; RBAC path segments. */
export function nameRuleOf(type: ResourceType): NameRule {
  if (type.group === '' && type.kind === 'Namespace') return isDns1123Label;
  if (type.group === '' && type.kind === 'Service') return isDns1035Label;
  if (type.group === 'rbac.authorization.k8s.io') return isPathSegment;
  return isDns1123Subdomain;
}

/** A generateName is checked as a name whose last dash is masked (maskTrailingDash). */
function masked(prefix: string): string {
  return prefix.length > 1 && prefix.endsWith('-') ? `${prefix.slice(0, -2)}a` : prefix;
}

const ANNOTATIONS_LIMIT = 256 * 1024;

function validateLabelsAndAnnotations(meta: KubeObject['metadata']): FieldError[] {
  const errs: FieldError[] = [];
  for (const [k, v] of Object.entries(meta.labels ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) {
    for (const m of isQualifiedName(k)) errs.push(fieldError.invalid('metadata.labels', k, m));
    if (typeof v !== 'string') continue;
    for (const m of isLabelValue(v)) errs.push(fieldError.invalid('metadata.labels', v, m));
  }
  const annotations = meta.annotations ?? {};
  for (const k of Object.keys(annotations).sort())
    for (const m of isQualifiedName(k.toLowerCase())) errs.push(fieldError.invalid('metadata.annotations', k, m));
  const size = Object.entries(annotations).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(String(v)), 0);
  if (size > ANNOTATIONS_LIMIT) errs.push(fieldError.tooLong('metadata.annotations', ANNOTATIONS_LIMIT));
  for (const ref of meta.ownerReferences ?? []) {
    if (!ref.apiVersion || ref.apiVersion.endsWith('/'))
      errs.push(fieldError.invalid('metadata.ownerReferences.apiVersion', ref.apiVersion ?? '', 'version must not be empty'));
    if (!ref.kind) errs.push(fieldError.invalid('metadata.ownerReferences.kind', ref.kind ?? '', 'kind must not be empty'));
    if (!ref.name) errs.push(fieldError.invalid('metadata.ownerReferences.name', ref.name ?? '', 'name must not be empty'));
    if (!ref.uid) errs.push(fieldError.invalid('metadata.ownerReferences.uid', ref.uid ?? '', 'uid must not be empty'));
  }
  return errs;
}

/** ValidateObjectMetaAccessor: what a create must satisfy, after name generation. */
export function validateObjectMeta(type: ResourceType, object: KubeObject): FieldError[] {
  const meta = object.metadata;
  const rule = nameRuleOf(type);
  const errs: FieldError[] = [];
  if (meta.generateName)
    for (const m of rule(masked(meta.generateName))) errs.push(fieldError.invalid('metadata.generateName', meta.generateName, m));
  if (!meta.name) errs.push(fieldError.required('metadata.name', 'name or generateName is required'));
  else for (const m of rule(meta.name)) errs.push(fieldError.invalid('metadata.name', meta.name, m));
  if (type.namespaced) {
    if (!meta.namespace) errs.push(fieldError.required('metadata.namespace'));
    else for (const m of isDns1123Label(meta.namespace)) errs.push(fieldError.invalid('metadata.namespace', meta.namespace, m));
  }
  errs.push(...validateLabelsAndAnnotations(meta));
  for (const f of meta.finalizers ?? []) for (const m of isQualifiedName(f)) errs.push(fieldError.invalid('metadata.finalizers', f, m));
  if (type.kind === 'CustomResourceDefinition' && meta.name) {
    const spec = (object.spec ?? {}) as { group?: string; names?: { plural?: string } };
    if (meta.name !== `${spec.names?.plural}.${spec.group}`)
      errs.push(fieldError.invalid('metadata.name', meta.name, 'must be spec.names.plural+"."+spec.group'));
  }
  return errs;
}

/** ValidateObjectMetaAccessorUpdate: the fields an update may not change, and what a create checks too. */
export function validateObjectMetaUpdate(object: KubeObject, old: KubeObject): FieldError[] {
  const meta = object.metadata;
  const before = old.metadata;
  const errs: FieldError[] = [];
  if (before.deletionTimestamp) {
    const added = [...new Set(meta.finalizers ?? [])].filter((f) => !(before.finalizers ?? []).includes(f)).sort();
    if (added.length > 0)
      errs.push(
        fieldError.forbidden(
          'metadata.finalizers',
          `no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map(goQuote).join(', ')}}`,
        ),
      );
  }
  for (const field of ['name', 'namespace', 'uid', 'creationTimestamp', 'deletionTimestamp'] as const)
    if ((meta[field] ?? '') !== (before[field] ?? ''))
      errs.push(fieldError.invalid(`metadata.${field}`, meta[field] ?? '', 'field is immutable'));
  errs.push(...validateLabelsAndAnnotations(meta));
  for (const f of meta.finalizers ?? []) for (const m of isQualifiedName(f)) errs.push(fieldError.invalid('metadata.finalizers', f, m));
  return errs;
}

const STANDARD_FINALIZERS = new Set(['orphan', 'foregroundDeletion', 'kubernetes']);

/** The warnings a custom resource's new finalizers earn (apiextensions-apiserver validateKubeFinalizerName). */
export function finalizerWarnings(object: KubeObject, old: KubeObject | undefined): string[] {
  const added = [...new Set(object.metadata.finalizers ?? [])].filter((f) => !(old?.metadata.finalizers ?? []).includes(f)).sort();
  const warnings: string[] = [];
  for (const f of added) {
    for (const m of isQualifiedName(f)) warnings.push(`metadata.finalizers: ${goQuote(f)}: ${m}`);
    if (!f.includes('/') && !STANDARD_FINALIZERS.has(f))
      warnings.push(
        f.includes('.')
          ? `metadata.finalizers: ${goQuote(f)}: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers`
          : `metadata.finalizers: ${goQuote(f)}: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers`,
      );
  }
  return warnings;
}
