/**
 * Identities, impersonation and RBAC as kube-apiserver applies them to a request, in its order:
 * authentication (a bearer token names a user and its groups), impersonation (the `Impersonate-*` headers,
 * each authorized as the verb `impersonate`), then authorization by the Roles, ClusterRoles and their
 * bindings stored in the double. Sources: k8s.io/apiserver/pkg/endpoints/filters/impersonation.go,
 * k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go, plugin/pkg/auth/authorizer/rbac/rbac.go
 * and the Kubernetes docs: reference/access-authn-authz/rbac ("Using RBAC Authorization": rules, subjects,
 * default roles and bindings) and reference/access-authn-authz/authentication ("User impersonation").
 */
import type { IncomingHttpHeaders } from 'node:http';
import { errors, KubeApiError } from './errors.ts';
import type { RequestInfo } from './faults.ts';
import type { ResourceType } from './registry.ts';
import type { KubeObject, ObjectStore, RequestUser } from './store.ts';

export type { RequestUser } from './store.ts';

/** The group kube-apiserver lets do anything, before any authorizer is asked (authorizerfactory privileged groups). */
export const MASTERS = 'system:masters';
/** Added to every authenticated user by the authenticator (k8s.io/apiserver/pkg/authentication/group). */
export const AUTHENTICATED = 'system:authenticated';
const SA_PREFIX = 'system:serviceaccount:';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * The namespace and name of a service account's username, or undefined when it is not one. As
 * serviceaccount.SplitUsername: exactly `system:serviceaccount:<ns>:<name>` with a valid namespace and name.
 */
export function splitServiceAccount(username: string): { namespace: string; name: string } | undefined {
  if (!username.startsWith(SA_PREFIX)) return undefined;
  const parts = username.slice(SA_PREFIX.length).split(':');
  if (parts.length !== 2) return undefined;
  const [namespace = '', name = ''] = parts;
  if (namespace.length > 63 || !DNS_LABEL.test(namespace) || name.length > 253 || !DNS_SUBDOMAIN.test(name)) return undefined;
  return { namespace, name };
}

/** The identity a service account's token authenticates as (serviceaccount.MakeUsername, MakeGroupNames). */
export function serviceAccountUser(namespace: string, name: string): RequestUser {
  return {
    username: `${SA_PREFIX}${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, AUTHENTICATED],
  };
}

/** The identity a token of `username` authenticates as: a service account's fixed groups, or the ones given. */
export function identityOf(username: string, groups: string[] = []): RequestUser {
  const sa = splitServiceAccount(username);
  if (sa && groups.length === 0) return serviceAccountUser(sa.namespace, sa.name);
  return { username, groups: groups.includes(AUTHENTICATED) ? [...groups] : [...groups, AUTHENTICATED] };
}

/** What authorization is asked about, as authorizer.Attributes. */
export interface Attributes {
  user: RequestUser;
  verb: string;
  resourceRequest: boolean;
  /** The URL path, for non-resource requests. */
  path: string;
  group: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
}

/** The attributes of a request the double resolved (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go). */
export function attributesOf(user: RequestUser, info: RequestInfo, type: ResourceType | undefined): Attributes {
  if (info.verb === 'discovery' || info.resource === undefined)
    return {
      user,
      verb: info.method.toLowerCase(),
      resourceRequest: false,
      path: info.path,
      group: '',
      resource: '',
      subresource: '',
      namespace: '',
      name: '',
    };
  const name = info.name ?? '';
  // A namespace's own requests carry its name as their namespace, so a RoleBinding inside it can allow them.
  const namespace = info.namespace ?? (info.group === '' && info.resource === 'namespaces' ? name : '');
  return {
    user,
    verb: info.verb === 'other' ? info.method.toLowerCase() : info.verb,
    resourceRequest: true,
    path: info.path,
    group: type?.group ?? info.group ?? '',
    resource: info.resource,
    subresource: info.subresource ?? '',
    namespace,
    name,
  };
}

/** Go's %q for the strings these messages quote (ASCII names and paths). */
function q(value: string): string {
  return JSON.stringify(value);
}

/**
 * A 403 as responsewriters.Forbidden writes it: forbiddenMessage wrapped by apierrors.NewForbidden, with
 * `: <reason>` when the authorizer gave one, and `&`, `<`, `>` escaped.
 */
export function forbidden(attributes: Attributes, reason = ''): KubeApiError {
  const { user, verb } = attributes;
  let text: string;
  if (!attributes.resourceRequest) text = `User ${q(user.username)} cannot ${verb} path ${q(attributes.path)}`;
  else {
    const resource = attributes.subresource ? `${attributes.resource}/${attributes.subresource}` : attributes.resource;
    const scope = attributes.namespace ? `in the namespace ${q(attributes.namespace)}` : 'at the cluster scope';
    text = `User ${q(user.username)} cannot ${verb} resource ${q(resource)} in API group ${q(attributes.group)} ${scope}`;
  }
  text = text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  if (reason) text = `${text}: ${reason}`;
  const qualified = attributes.resourceRequest
    ? attributes.group
      ? `${attributes.resource}.${attributes.group}`
      : attributes.resource
    : '';
  const message = !qualified
    ? `forbidden: ${text}`
    : attributes.name
      ? `${qualified} ${q(attributes.name)} is forbidden: ${text}`
      : `${qualified} is forbidden: ${text}`;
  // metav1.StatusDetails fields are omitempty.
  const details: Record<string, unknown> = {};
  if (attributes.name) details.name = attributes.name;
  if (attributes.group) details.group = attributes.group;
  if (attributes.resource) details.kind = attributes.resource;
  return new KubeApiError(403, 'Forbidden', message, details);
}

interface PolicyRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

interface Subject {
  kind?: string;
  name?: string;
  namespace?: string;
}

interface Binding extends KubeObject {
  subjects?: Subject[];
  roleRef?: { kind?: string; name?: string };
}

/**
 * What every authenticated user may do on any cluster: the bootstrap ClusterRoles system:discovery,
 * system:public-info-viewer and system:basic-user, bound to system:authenticated
 * (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go). They are rules of the double, not stored
 * objects, so that suites listing ClusterRoles see only their own.
 */
const BOOTSTRAP_RULES: PolicyRule[] = [
  {
    verbs: ['get'],
    nonResourceURLs: [
      '/api',
      '/api/*',
      '/apis',
      '/apis/*',
      '/healthz',
      '/livez',
      '/openapi',
      '/openapi/*',
      '/readyz',
      '/version',
      '/version/',
    ],
  },
  {
    verbs: ['create'],
    apiGroups: ['authorization.k8s.io'],
    resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
  },
  { verbs: ['create'], apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'] },
];

/** rbacv1helpers: VerbMatches, APIGroupMatches, ResourceMatches (with `*` and the `*` + `/subresource` form), ResourceNameMatches, NonResourceURLMatches. */
function ruleAllows(attributes: Attributes, rule: PolicyRule): boolean {
  const verbs = rule.verbs ?? [];
  if (!verbs.includes('*') && !verbs.includes(attributes.verb)) return false;
  if (!attributes.resourceRequest)
    return (rule.nonResourceURLs ?? []).some(
      (url) => url === '*' || url === attributes.path || (url.endsWith('*') && attributes.path.startsWith(url.slice(0, -1))),
    );
  const groups = rule.apiGroups ?? [];
  if (!groups.includes('*') && !groups.includes(attributes.group)) return false;
  const combined = attributes.subresource ? `${attributes.resource}/${attributes.subresource}` : attributes.resource;
  const resourceMatches = (rule.resources ?? []).some(
    (r) => r === '*' || r === combined || (attributes.subresource !== '' && r === `*/${attributes.subresource}`),
  );
  if (!resourceMatches) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || names.includes(attributes.name);
}

/** rbac.appliesToUser: a ServiceAccount subject without a namespace is the binding's namespace's. */
function appliesTo(user: RequestUser, subject: Subject, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case 'User':
      return subject.name === user.username;
    case 'Group':
      return subject.name !== undefined && user.groups.includes(subject.name);
    case 'ServiceAccount': {
      const namespace = subject.namespace || bindingNamespace;
      return namespace !== '' && user.username === `${SA_PREFIX}${namespace}:${subject.name ?? ''}`;
    }
    default:
      return false;
  }
}

/**
 * The RBAC authorizer over the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings in the store. Off
 * until enabled, so that a suite that never wrote RBAC objects sees an API that allows everything.
 */
export class Rbac {
  readonly #store: ObjectStore;
  enabled = false;

  constructor(store: ObjectStore) {
    this.#store = store;
  }

  #list(kind: string, namespace?: string): KubeObject[] {
    const type = this.#store.registry.findByKind('rbac.authorization.k8s.io/v1', kind);
    return type ? this.#store.list(type, namespace).items : [];
  }

  #rules(kind: 'Role' | 'ClusterRole', name: string, namespace: string | undefined): PolicyRule[] | string {
    const found = this.#list(kind, namespace).find((r) => r.metadata.name === name);
    // The listers' NotFound errors, which the authorizer gathers into its reason.
    if (!found) return `${kind.toLowerCase()}.rbac.authorization.k8s.io ${q(name)} not found`;
    return ((found as { rules?: PolicyRule[] }).rules ?? []) as PolicyRule[];
  }

  /** The decision and, when refused, the reason the RBAC authorizer gives (`RBAC: <errors>`, usually empty). */
  authorize(attributes: Attributes): { allowed: boolean; reason: string } {
    const { user } = attributes;
    if (!this.enabled || user.groups.includes(MASTERS)) return { allowed: true, reason: '' };
    if (user.groups.includes(AUTHENTICATED) && BOOTSTRAP_RULES.some((rule) => ruleAllows(attributes, rule)))
      return { allowed: true, reason: '' };
    const problems: string[] = [];
    const visit = (bindings: Binding[], namespace: string): boolean => {
      for (const binding of bindings) {
        if (!(binding.subjects ?? []).some((s) => appliesTo(user, s, namespace))) continue;
        const ref = binding.roleRef ?? {};
        const rules =
          ref.kind === 'Role' ? this.#rules('Role', ref.name ?? '', namespace) : this.#rules('ClusterRole', ref.name ?? '', undefined);
        if (typeof rules === 'string') problems.push(rules);
        else if (rules.some((rule) => ruleAllows(attributes, rule))) return true;
      }
      return false;
    };
    if (visit(this.#list('ClusterRoleBinding') as Binding[], '')) return { allowed: true, reason: '' };
    if (attributes.namespace && visit(this.#list('RoleBinding', attributes.namespace) as Binding[], attributes.namespace))
      return { allowed: true, reason: '' };
    // utilerrors.NewAggregate: one error as itself, several deduplicated inside brackets.
    const unique = [...new Set(problems)];
    const reason = unique.length === 0 ? '' : `RBAC: ${unique.length === 1 ? unique[0] : `[${unique.join(', ')}]`}`;
    return { allowed: false, reason };
  }

  /** Throws the 403 kube-apiserver answers when the request is not allowed. */
  check(attributes: Attributes): void {
    const { allowed, reason } = this.authorize(attributes);
    if (!allowed) throw forbidden(attributes, reason);
  }
}

/** One thing to impersonate, as buildImpersonationRequests turns the headers into object references. */
interface ImpersonationRequest {
  kind: 'ServiceAccount' | 'User' | 'Group' | 'UserExtra' | 'UID';
  namespace: string;
  name: string;
  apiVersion: string;
  fieldPath: string;
}

/** Go's %v of a v1.ObjectReference list, which the 400 for groups without a user prints. */
function goReferences(requests: ImpersonationRequest[]): string {
  return `[${requests.map((r) => `{${[r.kind, r.namespace, r.name, '', r.apiVersion, '', r.fieldPath].join(' ')}}`).join(' ')}]`;
}

/** A %-encoded extra key, or the key as sent when it does not decode (impersonation.go unescapeExtraKey). */
function unescapeExtraKey(key: string): string {
  try {
    return decodeURIComponent(key);
  } catch {
    return key;
  }
}

/**
 * The identity a request runs as after its `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
 * `Impersonate-Extra-*` headers (what `kubectl --as/--as-group` and a kubeconfig's `as` send), or the
 * requestor itself when it sent none. Each thing impersonated is authorized first as the verb `impersonate`
 * on `users`, `groups`, `serviceaccounts` (in the account's namespace, by its name), `uids` or `userextras`
 * (filters/impersonation.go); a refusal is the 403 of that check.
 */
export function impersonate(
  rbac: Rbac,
  requestor: RequestUser,
  headers: IncomingHttpHeaders,
  distinct: NodeJS.Dict<string[]>,
): RequestUser {
  const requested = (headers['impersonate-user'] as string | undefined) ?? '';
  const groupValues = distinct['impersonate-group'] ?? [];
  const uid = (headers['impersonate-uid'] as string | undefined) ?? '';
  const requests: ImpersonationRequest[] = [];
  const sa = requested ? splitServiceAccount(requested) : undefined;
  if (sa) requests.push({ kind: 'ServiceAccount', namespace: sa.namespace, name: sa.name, apiVersion: '', fieldPath: '' });
  else if (requested) requests.push({ kind: 'User', namespace: '', name: requested, apiVersion: '', fieldPath: '' });
  for (const group of groupValues) requests.push({ kind: 'Group', namespace: '', name: group, apiVersion: '', fieldPath: '' });
  for (const [header, values] of Object.entries(distinct)) {
    if (!header.startsWith('impersonate-extra-')) continue;
    const key = unescapeExtraKey(header.slice('impersonate-extra-'.length));
    for (const value of values ?? [])
      requests.push({ kind: 'UserExtra', namespace: '', name: value, apiVersion: 'authentication.k8s.io/v1', fieldPath: key });
  }
  if (uid) requests.push({ kind: 'UID', namespace: '', name: uid, apiVersion: 'authentication.k8s.io/v1', fieldPath: '' });
  if (requests.length === 0) return requestor;
  if (!requested) throw errors.badRequest(`requested ${goReferences(requests)} without impersonating a user`);

  let groups: string[] = [];
  for (const r of requests) {
    const resource = { ServiceAccount: 'serviceaccounts', User: 'users', Group: 'groups', UserExtra: 'userextras', UID: 'uids' }[r.kind];
    const attributes: Attributes = {
      user: requestor,
      verb: 'impersonate',
      resourceRequest: true,
      path: '',
      group: r.apiVersion ? 'authentication.k8s.io' : '',
      resource,
      subresource: r.kind === 'UserExtra' ? r.fieldPath : '',
      namespace: r.namespace,
      name: r.name,
    };
    rbac.check(attributes);
    if (r.kind === 'Group') groups.push(r.name);
  }
  // A service account's groups are known when none are asked for; system:authenticated is added unless
  // system:authenticated or system:unauthenticated is asked for explicitly.
  if (sa && groupValues.length === 0) groups = ['system:serviceaccounts', `system:serviceaccounts:${sa.namespace}`];
  if (requested === 'system:anonymous') {
    if (!groups.includes('system:unauthenticated')) groups.push('system:unauthenticated');
  } else if (!groups.includes(AUTHENTICATED) && !groups.includes('system:unauthenticated')) groups.push(AUTHENTICATED);
  return { username: requested, groups };
}
