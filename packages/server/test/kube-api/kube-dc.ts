import type { KubeApi } from './index.ts';
import type { KubeObject } from './store.ts';

/**
 * The custom resources of a Kube-DC cluster, as the double serves them: Kube-DC's Organization, Project
 * and Partner (kube-dc.com/v1), its managed databases (KdcDatabase, db.kube-dc.com/v1alpha1), KubeVirt's
 * VirtualMachine (kubevirt.io/v1) and HNC's HierarchicalResourceQuota (hnc.x-k8s.io/v1alpha2). Each is
 * registered by creating its CustomResourceDefinition through the store, as `kubectl apply` of the CRD
 * files would on a cluster; only group, names, scope and the status subresource matter to the double
 * (it validates no schema). Written from Kube-DC's public CRDs and docs, not copied.
 */
interface Definition {
  group: string;
  version: string;
  kind: string;
  plural: string;
  shortNames?: string[];
  namespaced?: boolean;
  status?: boolean;
}

export const KUBE_DC_KINDS: Definition[] = [
  { group: 'kube-dc.com', version: 'v1', kind: 'Organization', plural: 'organizations', status: true },
  { group: 'kube-dc.com', version: 'v1', kind: 'Project', plural: 'projects', status: true },
  { group: 'kube-dc.com', version: 'v1', kind: 'Partner', plural: 'partners', shortNames: ['prt'], status: true },
  { group: 'db.kube-dc.com', version: 'v1alpha1', kind: 'KdcDatabase', plural: 'kdcdatabases', shortNames: ['kdcdb'], status: true },
  { group: 'kubevirt.io', version: 'v1', kind: 'VirtualMachine', plural: 'virtualmachines', shortNames: ['vm', 'vms'], status: true },
  {
    group: 'hnc.x-k8s.io',
    version: 'v1alpha2',
    kind: 'HierarchicalResourceQuota',
    plural: 'hierarchicalresourcequotas',
    shortNames: ['hrq'],
    status: true,
  },
];

export function crdOf(definition: Definition): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${definition.plural}.${definition.group}` },
    spec: {
      group: definition.group,
      scope: definition.namespaced === false ? 'Cluster' : 'Namespaced',
      names: {
        kind: definition.kind,
        plural: definition.plural,
        singular: definition.kind.toLowerCase(),
        listKind: `${definition.kind}List`,
        ...(definition.shortNames ? { shortNames: definition.shortNames } : {}),
      },
      versions: [
        {
          name: definition.version,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          ...(definition.status ? { subresources: { status: {} } } : {}),
        },
      ],
    },
  };
}

/** Registers every Kube-DC kind (idempotent) and the `kube-dc` namespace the platform's own objects live in. */
export function installKubeDc(kube: KubeApi): void {
  for (const definition of KUBE_DC_KINDS) {
    if (!kube.tryGet('apiextensions.k8s.io/v1', 'CustomResourceDefinition', `${definition.plural}.${definition.group}`))
      kube.create(crdOf(definition));
  }
  if (!kube.tryGet('v1', 'Namespace', 'kube-dc')) kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-dc' } });
}

/** A `Ready` condition as Kube-DC's controllers write it (metav1.Condition). */
export function condition(status: 'True' | 'False' | 'Unknown', reason: string, message: string, generation: number, at: Date) {
  return {
    type: 'Ready',
    status,
    reason,
    message,
    observedGeneration: generation,
    lastTransitionTime: at.toISOString().replace(/\.\d+Z$/, 'Z'),
  };
}
