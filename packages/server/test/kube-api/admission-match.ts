/**
 * Which writes an admission policy or webhook sees: its rules (group, version, operation, resource with
 * subresource, scope, names) and its namespace and object selectors, as kube-apiserver matches them
 * (k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go,
 * .../predicates/namespace/matcher.go, .../predicates/object/matcher.go).
 */
import type { AdmissionRequest, KubeObject, ObjectStore } from './store.ts';

/** admissionregistration.k8s.io/v1 RuleWithOperations (plus NamedRuleWithOperations' resourceNames). */
export interface AdmissionRule {
  apiGroups?: string[];
  apiVersions?: string[];
  operations?: string[];
  resources?: string[];
  scope?: 'Cluster' | 'Namespaced' | '*';
  resourceNames?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

function exactOrWildcard(items: string[] | undefined, requested: string): boolean {
  return (items ?? []).some((item) => item === '*' || item === requested);
}

/**
 * rules.Matcher: `pods` is the resource alone, `pods/status` one subresource, `pods/*` the resource and all
 * its subresources, `*` every resource without subresources, `*` + `/*` everything. Namespaces count as
 * cluster-scoped.
 */
export function ruleMatches(rule: AdmissionRule, request: AdmissionRequest): boolean {
  const { type } = request;
  const isNamespace = type.group === '' && type.plural === 'namespaces';
  const namespaced = type.namespaced && !isNamespace;
  if (rule.scope === 'Cluster' && namespaced) return false;
  if (rule.scope === 'Namespaced' && !namespaced) return false;
  if (!exactOrWildcard(rule.operations, request.operation)) return false;
  if (!exactOrWildcard(rule.apiGroups, type.group)) return false;
  if (!exactOrWildcard(rule.apiVersions, type.version)) return false;
  const subresource = request.subresource ?? '';
  const resourceMatches = (rule.resources ?? []).some((entry) => {
    const slash = entry.indexOf('/');
    const resource = slash === -1 ? entry : entry.slice(0, slash);
    const sub = slash === -1 ? '' : entry.slice(slash + 1);
    return (resource === '*' || resource === type.plural) && (sub === '*' || sub === subresource);
  });
  if (!resourceMatches) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || names.includes(request.name);
}

/** metav1.LabelSelector; an empty or absent selector matches everything. */
export function selectorMatches(selector: LabelSelector | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector) return true;
  const have = labels ?? {};
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) if (have[key] !== value) return false;
  for (const expression of selector.matchExpressions ?? []) {
    const present = Object.hasOwn(have, expression.key);
    const values = expression.values ?? [];
    const value = have[expression.key] ?? '';
    if (expression.operator === 'In' && !(present && values.includes(value))) return false;
    if (expression.operator === 'NotIn' && present && values.includes(value)) return false;
    if (expression.operator === 'Exists' && !present) return false;
    if (expression.operator === 'DoesNotExist' && present) return false;
  }
  return true;
}

/** The Namespace object of a namespaced request, for namespaceSelector and the CEL `namespaceObject`. */
export function namespaceOf(store: ObjectStore, request: AdmissionRequest): KubeObject | undefined {
  if (!request.namespace || !request.type.namespaced) return undefined;
  const type = store.registry.findByKind('v1', 'Namespace');
  if (!type) return undefined;
  try {
    return store.get(type, undefined, request.namespace);
  } catch {
    return undefined;
  }
}

/**
 * namespace.Matcher: a namespaced object is matched by its namespace's labels, a Namespace by its own; any
 * other cluster-scoped object is never skipped by a namespaceSelector.
 */
export function namespaceSelectorMatches(store: ObjectStore, selector: LabelSelector | undefined, request: AdmissionRequest): boolean {
  if (!selector || (Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions ?? []).length === 0)) return true;
  const { type } = request;
  if (type.group === '' && type.plural === 'namespaces') {
    const own = request.object ?? request.oldObject;
    return selectorMatches(selector, own?.metadata.labels);
  }
  if (!type.namespaced) return true;
  return selectorMatches(selector, namespaceOf(store, request)?.metadata.labels);
}

/** object.Matcher: the object or the old object has to match. */
export function objectSelectorMatches(selector: LabelSelector | undefined, request: AdmissionRequest): boolean {
  if (!selector || (Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions ?? []).length === 0)) return true;
  return (
    (request.object !== undefined && selectorMatches(selector, request.object.metadata.labels)) ||
    (request.oldObject !== undefined && selectorMatches(selector, request.oldObject.metadata.labels))
  );
}

/** The configuration kinds admission never sees, so that a bad policy or webhook can always be fixed. */
export function isExempt(request: AdmissionRequest): boolean {
  return request.type.group === 'admissionregistration.k8s.io';
}

/** `pods` or `organizations.kube-dc.com`, as schema.GroupResource prints itself. */
export function groupResource(request: AdmissionRequest): string {
  return request.type.group ? `${request.type.plural}.${request.type.group}` : request.type.plural;
}
