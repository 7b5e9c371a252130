import type { KubeApi } from './index.ts';
import type { KubeObject } from './store.ts';

/** The LimitRange Kube-DC derives from a plan (tests/e2e/organization_quota_test.go); HNC copies it into every project namespace. */
export const PLAN_LIMITS = 'default-resource-limits';

/** Creates the core object, or sets its spec (and labels) to these. */
export function upsertSpec(
  kube: KubeApi,
  kind: string,
  name: string,
  namespace: string,
  labels: Record<string, string>,
  spec: Record<string, unknown>,
): void {
  const existing = kube.tryGet('v1', kind, name, namespace);
  if (!existing) kube.create({ apiVersion: 'v1', kind, metadata: { name, namespace, labels }, spec });
  else if (JSON.stringify(existing.spec ?? {}) !== JSON.stringify(spec))
    kube.patch('v1', kind, name, namespace, { metadata: { labels }, spec });
}

/** A plan's LimitRange settings as Kube-DC's billing-plans ConfigMap writes them (values.yaml, billing.plans). */
export interface PlanDefinition {
  requests?: Record<string, string>;
  pods?: number;
  limitRange?: Record<string, string>;
}

/** The LimitRange's limits in the order Kube-DC writes them: Container, Pod, PersistentVolumeClaim. */
export function limitRangeOf(settings: Record<string, string>): Record<string, unknown>[] {
  const pick = (entries: Record<string, string | undefined>) =>
    Object.fromEntries(Object.entries(entries).filter((entry): entry is [string, string] => entry[1] !== undefined));
  return [
    {
      type: 'Container',
      default: pick({ cpu: settings.defaultCPU, memory: settings.defaultMemory }),
      defaultRequest: pick({ cpu: settings.defaultRequestCPU, memory: settings.defaultRequestMem }),
      max: pick({ cpu: settings.maxCPU, memory: settings.maxMemory }),
      min: pick({ cpu: settings.minCPU, memory: settings.minMemory }),
    },
    { type: 'Pod', max: pick({ cpu: settings.maxPodCPU, memory: settings.maxPodMemory }) },
    { type: 'PersistentVolumeClaim', max: pick({ storage: settings.maxPVCStorage }), min: pick({ storage: settings.minPVCStorage }) },
  ];
}

const SCALE: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, m: 1e-3 };
function quantity(value: string | undefined): number | undefined {
  const match = value === undefined ? null : /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|m)?$/.exec(value);
  return match ? Number(match[1]) * (SCALE[match[2] ?? ''] ?? 1) : undefined;
}

/**
 * Why the API server's LimitRanger refuses the VM's launcher pod, or undefined: its compute container
 * asks the VM's requests and is limited to its limits, or to the LimitRange's defaults when it has none
 * (KubeVirt adds overhead to both, which the double leaves out).
 */
export function launcherRefusal(vm: KubeObject, ranges: KubeObject[]): string | undefined {
  type Domain = { resources?: Record<string, Record<string, string> | undefined>; memory?: { guest?: string } };
  const domain = ((vm.spec as { template?: { spec?: { domain?: Domain } } } | undefined)?.template?.spec?.domain ?? {}) as Domain;
  type Limit = { type?: string; default?: Record<string, string>; max?: Record<string, string> };
  for (const range of ranges) {
    for (const limit of ((range.spec as { limits?: Limit[] } | undefined)?.limits ?? []).filter((l) => l.type === 'Container')) {
      for (const resource of ['cpu', 'memory'] as const) {
        const request = domain.resources?.requests?.[resource] ?? (resource === 'memory' ? domain.memory?.guest : undefined);
        const limited = domain.resources?.limits?.[resource] ?? limit.default?.[resource];
        const max = limit.max?.[resource];
        if (limited !== undefined && request !== undefined && (quantity(limited) ?? 0) < (quantity(request) ?? 0))
          return `[spec.containers[0].resources.requests: Invalid value: "${request}": must be less than or equal to ${resource} limit of ${limited}]`;
        if (max !== undefined && limited !== undefined && (quantity(limited) ?? 0) > (quantity(max) ?? Infinity))
          return `maximum ${resource} usage per Container is ${max}, but limit is ${limited}`;
      }
    }
  }
  return undefined;
}

/**
 * A project's backing namespace as Kube-DC's Project controller makes it (tests/e2e/project_test.go,
 * docs/cloud/team-management.md, docs/platform/security-model.md): labelled `kube-dc.com/project=""`,
 * Roles `admin` and `user` bound to the realm's groups `<org>:org-admin` and `<org>:user`, the SSH key
 * Secrets, and the plan's LimitRange that HNC copies from the organization's namespace.
 */
export function ensureBackingNamespace(kube: KubeApi, organization: string, project: string, backing: string): void {
  if (!kube.tryGet('v1', 'Namespace', backing)) {
    kube.create({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: backing,
        labels: { 'kube-dc.com/organization': organization, 'kube-dc.com/project': '' },
        annotations: { 'kube-dc.com/project': `${organization}/${project}` },
      },
    });
  }
  const rbac = 'rbac.authorization.k8s.io/v1';
  for (const [role, group, rules] of [
    ['admin', 'org-admin', [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }]],
    ['user', 'user', [{ apiGroups: ['', 'kubevirt.io'], resources: ['*'], verbs: ['get', 'list', 'watch'] }]],
  ] as const) {
    if (!kube.tryGet(rbac, 'Role', role, backing))
      kube.create({ apiVersion: rbac, kind: 'Role', metadata: { name: role, namespace: backing }, rules });
    if (!kube.tryGet(rbac, 'RoleBinding', group, backing))
      kube.create({
        apiVersion: rbac,
        kind: 'RoleBinding',
        metadata: { name: group, namespace: backing },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `${organization}:${group}` }],
      });
  }
  const key = (text: string) => Buffer.from(text).toString('base64');
  if (!kube.tryGet('v1', 'Secret', 'ssh-keypair-default', backing))
    kube.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'ssh-keypair-default', namespace: backing },
      data: { id_rsa: key('-----BEGIN OPENSSH PRIVATE KEY-----\n(double)\n'), 'id_rsa.pub': key(`ssh-rsa AAAA ${backing}`) },
    });
  if (!kube.tryGet('v1', 'Secret', 'authorized-keys-default', backing))
    kube.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'authorized-keys-default', namespace: backing },
      data: { admin: key(`ssh-rsa AAAA ${backing}`) },
    });
  const limits = kube.tryGet('v1', 'LimitRange', PLAN_LIMITS, organization);
  if (limits)
    upsertSpec(kube, 'LimitRange', PLAN_LIMITS, backing, limits.metadata.labels ?? {}, (limits.spec ?? {}) as Record<string, unknown>);
}
