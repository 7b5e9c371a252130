import type { JsonSchema } from './schema-validate.ts';

/**
 * The resource types the Kubernetes API double serves. Built-in kinds are registered up front; custom
 * resources are added with `register` (or by creating a CustomResourceDefinition through the API, as on a
 * real cluster).
 */
export interface ResourceType {
  /** '' for the core group. */
  group: string;
  version: string;
  kind: string;
  /** Lower-case plural used in paths (`services`, `endpointslices`). */
  plural: string;
  namespaced: boolean;
  /** Whether `/status` is a subresource: the main resource then ignores status changes and vice versa. */
  statusSubresource?: boolean;
  shortNames?: string[];
  /**
   * The structural schema of a custom resource (its CRD version's `schema.openAPIV3Schema`): writes are
   * pruned, defaulted and validated against it. Types registered without a CRD have none and are not checked.
   */
  schema?: JsonSchema;
  /** Additional printer columns of a CRD version (kubectl's table columns). */
  printerColumns?: Array<{ name: string; type: string; jsonPath: string; description?: string; format?: string; priority?: number }>;
}

/** `v1` for the core group, `group/version` otherwise, as in an object's apiVersion. */
export function apiVersionOf(type: Pick<ResourceType, 'group' | 'version'>): string {
  return type.group === '' ? type.version : `${type.group}/${type.version}`;
}

function key(group: string, version: string, plural: string): string {
  return `${group}/${version}/${plural}`;
}

const BUILT_IN: ResourceType[] = [
  { group: '', version: 'v1', kind: 'Namespace', plural: 'namespaces', shortNames: ['ns'], namespaced: false, statusSubresource: true },
  { group: '', version: 'v1', kind: 'Node', plural: 'nodes', shortNames: ['no'], namespaced: false, statusSubresource: true },
  { group: '', version: 'v1', kind: 'Service', plural: 'services', shortNames: ['svc'], namespaced: true, statusSubresource: true },
  { group: '', version: 'v1', kind: 'Endpoints', plural: 'endpoints', shortNames: ['ep'], namespaced: true },
  { group: '', version: 'v1', kind: 'Pod', plural: 'pods', shortNames: ['po'], namespaced: true, statusSubresource: true },
  {
    group: '',
    version: 'v1',
    kind: 'ResourceQuota',
    plural: 'resourcequotas',
    shortNames: ['quota'],
    namespaced: true,
    statusSubresource: true,
  },
  { group: '', version: 'v1', kind: 'LimitRange', plural: 'limitranges', shortNames: ['limits'], namespaced: true },
  { group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps', shortNames: ['cm'], namespaced: true },
  { group: '', version: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true },
  { group: '', version: 'v1', kind: 'ServiceAccount', plural: 'serviceaccounts', shortNames: ['sa'], namespaced: true },
  { group: '', version: 'v1', kind: 'Event', plural: 'events', shortNames: ['ev'], namespaced: true },
  { group: 'events.k8s.io', version: 'v1', kind: 'Event', plural: 'events', namespaced: true },
  { group: 'discovery.k8s.io', version: 'v1', kind: 'EndpointSlice', plural: 'endpointslices', namespaced: true },
  { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases', namespaced: true },
  {
    group: 'apps',
    version: 'v1',
    kind: 'Deployment',
    plural: 'deployments',
    shortNames: ['deploy'],
    namespaced: true,
    statusSubresource: true,
  },
  { group: 'apps', version: 'v1', kind: 'DaemonSet', plural: 'daemonsets', shortNames: ['ds'], namespaced: true, statusSubresource: true },
  {
    group: 'apps',
    version: 'v1',
    kind: 'StatefulSet',
    plural: 'statefulsets',
    shortNames: ['sts'],
    namespaced: true,
    statusSubresource: true,
  },
  {
    group: 'apps',
    version: 'v1',
    kind: 'ReplicaSet',
    plural: 'replicasets',
    shortNames: ['rs'],
    namespaced: true,
    statusSubresource: true,
  },
  { group: 'batch', version: 'v1', kind: 'Job', plural: 'jobs', namespaced: true, statusSubresource: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'Role', plural: 'roles', namespaced: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'RoleBinding', plural: 'rolebindings', namespaced: true },
  { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRole', plural: 'clusterroles', namespaced: false },
  { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRoleBinding', plural: 'clusterrolebindings', namespaced: false },
  {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    kind: 'CustomResourceDefinition',
    plural: 'customresourcedefinitions',
    shortNames: ['crd', 'crds'],
    namespaced: false,
    statusSubresource: true,
  },
];

export class ResourceRegistry {
  readonly #types = new Map<string, ResourceType>();

  constructor() {
    for (const type of BUILT_IN) this.register(type);
  }

  /** Adds a type (a custom resource, say). Registering the same group/version/plural again replaces it. */
  register(type: ResourceType): ResourceType {
    this.#types.set(key(type.group, type.version, type.plural), type);
    return type;
  }

  find(group: string, version: string, plural: string): ResourceType | undefined {
    return this.#types.get(key(group, version, plural));
  }

  findByKind(apiVersion: string, kind: string): ResourceType | undefined {
    for (const type of this.#types.values()) if (apiVersionOf(type) === apiVersion && type.kind === kind) return type;
    return undefined;
  }

  all(): ResourceType[] {
    return [...this.#types.values()];
  }

  /** Group/version pairs, for discovery. */
  groupVersions(): Array<{ group: string; version: string }> {
    const seen = new Map<string, { group: string; version: string }>();
    for (const type of this.#types.values()) seen.set(`${type.group}/${type.version}`, { group: type.group, version: type.version });
    return [...seen.values()];
  }

  /** Registers each served version of a CustomResourceDefinition object (apiextensions.k8s.io/v1). */
  registerDefinition(crd: Record<string, unknown>): void {
    const spec = (crd.spec ?? {}) as {
      group?: string;
      scope?: string;
      names?: { kind?: string; plural?: string; shortNames?: string[] };
      versions?: Array<{
        name?: string;
        served?: boolean;
        subresources?: { status?: unknown };
        schema?: { openAPIV3Schema?: JsonSchema };
        additionalPrinterColumns?: ResourceType['printerColumns'];
      }>;
    };
    if (!spec.group || !spec.names?.kind || !spec.names.plural) return;
    for (const version of spec.versions ?? []) {
      if (!version.name || version.served === false) continue;
      this.register({
        group: spec.group,
        version: version.name,
        kind: spec.names.kind,
        plural: spec.names.plural,
        namespaced: spec.scope !== 'Cluster',
        statusSubresource: version.subresources?.status !== undefined,
        ...(spec.names.shortNames ? { shortNames: spec.names.shortNames } : {}),
        ...(version.schema?.openAPIV3Schema ? { schema: version.schema.openAPIV3Schema } : {}),
        ...(version.additionalPrinterColumns ? { printerColumns: version.additionalPrinterColumns } : {}),
      });
    }
  }
}
