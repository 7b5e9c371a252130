import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { KubeApi } from './index.ts';
import type { KubeObject } from './store.ts';

/**
 * The custom resources of a Kube-DC cluster, as the double serves them. Kube-DC's own kinds are created
 * from its real CustomResourceDefinitions, vendored in `test/kube-dc/crds/` (see the README there):
 * Organization, Project, OrganizationGroup and Partner (kube-dc.com/v1) and KdcDatabase
 * (db.kube-dc.com/v1alpha1). Their schemas are enforced as a real API server enforces them: unknown
 * fields pruned, defaults filled in, types, patterns, enums, required fields and CEL rules checked.
 *
 * Kinds of other projects whose CRDs are not vendored stay permissive (a schema that preserves unknown
 * fields, so nothing is checked): KubeVirt's VirtualMachine (kubevirt.io/v1) and HNC's
 * HierarchicalResourceQuota (hnc.x-k8s.io/v1alpha2). CloudNativePG's Cluster is registered by the
 * controller double without any CRD.
 */
const CRDS = join(dirname(fileURLToPath(import.meta.url)), '../kube-dc/crds');

export const KUBE_DC_CRD_FILES = [
  'kube-dc.com_organizations.yaml',
  'kube-dc.com_projects.yaml',
  'kube-dc.com_organizationgroups.yaml',
  'kube-dc.com_partners.yaml',
  'db.kube-dc.com_kdcdatabases.yaml',
];

/** A vendored CRD file as the object `kubectl apply -f` would create. */
export function kubeDcCrd(file: string): KubeObject {
  const documents = parseAllDocuments(readFileSync(join(CRDS, file), 'utf8')).filter((d) => d.contents !== null);
  const [document] = documents;
  if (!document || documents.length !== 1) throw new Error(`${file} should hold one CustomResourceDefinition`);
  return document.toJS() as KubeObject;
}

interface Definition {
  group: string;
  version: string;
  kind: string;
  plural: string;
  shortNames?: string[];
  namespaced?: boolean;
  status?: boolean;
}

/** The kinds whose CRDs are not vendored: served with a schema that checks nothing. */
export const PERMISSIVE_KINDS: Definition[] = [
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
  const crds = [...KUBE_DC_CRD_FILES.map(kubeDcCrd), ...PERMISSIVE_KINDS.map(crdOf)];
  for (const crd of crds)
    if (!kube.tryGet('apiextensions.k8s.io/v1', 'CustomResourceDefinition', crd.metadata.name ?? '')) kube.create(crd);
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
