import { stringify as toYaml } from 'yaml';
import { template } from './chart/helm.ts';
import { KeycloakDouble } from './keycloak/index.ts';
import { KubeApi } from './kube-api/index.ts';
import { KubeDcController } from './kube-api/kube-dc-controller.ts';
import { installKubeDcPolicies } from './kube-api/kube-dc-policies.ts';
import { kubeDcProjectWebhook } from './kube-api/kube-dc-webhooks.ts';
import type { KubeObject } from './kube-api/store.ts';

/** The namespace `tenantry serve` runs in, as the chart installs it, and its ServiceAccount. */
export const DRIVER_NAMESPACE = 'tenantry';
export const DRIVER_USER = `system:serviceaccount:${DRIVER_NAMESPACE}:tenantry`;
/** Kube-DC's release namespace and the service account the chart makes there for plan changes. */
export const KUBE_DC_NAMESPACE = 'kube-dc';
export const PLAN_WRITER = 'tenantry-plan-writer';

/**
 * Kube-DC's `dev-pool` plan as its chart seeds `billing-plans` (values.yaml at 116783f, lines 1110-1153:
 * requests, pods and the LimitRange), and a larger plan of the double's own for plan changes.
 */
const PLANS = {
  plans: {
    'dev-pool': {
      requests: { cpu: '4', memory: '8Gi', storage: '60Gi' },
      pods: 100,
      limitRange: {
        defaultCPU: '500m',
        defaultMemory: '512Mi',
        defaultRequestCPU: '100m',
        defaultRequestMem: '128Mi',
        maxCPU: '4',
        maxMemory: '8Gi',
        minCPU: '1m',
        minMemory: '1Mi',
        maxPodCPU: '4',
        maxPodMemory: '8Gi',
        maxPVCStorage: '60Gi',
        minPVCStorage: '10Mi',
      },
    },
    'pro-pool': {
      requests: { cpu: '16', memory: '32Gi', storage: '200Gi' },
      pods: 200,
      limitRange: { defaultCPU: '1', defaultMemory: '1Gi', maxCPU: '16', maxMemory: '32Gi', maxPodCPU: '16', maxPodMemory: '32Gi' },
    },
  },
};

/** The chart values that render the driver's RBAC (and nothing that needs a cluster of its own). */
export const DRIVER_CHART_VALUES = {
  serve: {
    database: { secretName: 'tenantry-db' },
    operatorToken: { secretName: 'tenantry-operator' },
    secretKey: { secretName: 'tenantry-secret-key' },
    config: { platform: 'kubernetes' },
  },
  platformDriver: {
    kubernetes: {
      identity: {
        url: 'https://login.example.com',
        clientSecret: { secretName: 'tenantry-idp' },
        loginRedirectURL: 'https://console.example.com/',
      },
      addressPool: '10.100.0.0/16',
      gpuProfiles: 'nvidia-a10=nvidia.com/GA102GL_A10',
      kubeDc: { namespace: KUBE_DC_NAMESPACE, serviceAccount: { create: true, name: PLAN_WRITER } },
    },
  },
};

let renderedRbac: KubeObject[] | undefined;

/** The RBAC objects the chart renders for the driver: what `helm install` would create. */
export function driverRbac(): KubeObject[] {
  if (!renderedRbac) {
    // Release `tenantry` in namespace `tenantry`, as helm.ts renders every chart test.
    const rendered = template(DRIVER_CHART_VALUES);
    if (rendered.error) throw new Error(`the chart does not render: ${rendered.error}`);
    renderedRbac = rendered.objects
      .filter((o) => ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind))
      .map((o) => o as unknown as KubeObject);
  }
  return renderedRbac;
}

export interface KubeDcCluster {
  kube: KubeApi;
  keycloak: KeycloakDouble;
  controller: KubeDcController;
  close(): Promise<void>;
}

/**
 * A Kube-DC cluster on the doubles, refusing what Kube-DC refuses: the Kubernetes API with Kube-DC's CRDs
 * (their schemas and CEL rules), its admission policies and its project webhook, RBAC as the chart
 * grants it to the driver's service account, Kube-DC's controller (which makes each organization's
 * realm in the Keycloak double), the `billing-plans` and `images-configmap` ConfigMaps of Kube-DC's
 * namespace.
 */
export async function startKubeDcCluster(
  options: { running?: boolean; allowPublicProjects?: boolean; reconcileDelayMs?: number } = {},
): Promise<KubeDcCluster> {
  const kube = await KubeApi.start();
  const keycloak = await KeycloakDouble.start();
  const controller = new KubeDcController(kube, {
    running: options.running ?? true,
    keycloak,
    allowPublicProjects: options.allowPublicProjects ?? false,
    reconcileDelayMs: options.reconcileDelayMs ?? 0,
  });
  installKubeDcPolicies(kube);
  kube.webhooks.add(kubeDcProjectWebhook({ allowPublicProjects: options.allowPublicProjects ?? false }));
  for (const name of [DRIVER_NAMESPACE])
    if (!kube.tryGet('v1', 'Namespace', name)) kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  kube.create({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'billing-plans', namespace: KUBE_DC_NAMESPACE },
    data: { 'plans.yaml': toYaml(PLANS) },
  });
  for (const object of driverRbac()) kube.create(structuredClone(object));
  kube.addServiceAccount(DRIVER_NAMESPACE, 'tenantry');
  kube.addServiceAccount(KUBE_DC_NAMESPACE, PLAN_WRITER);
  kube.enforceRbac(true);
  return {
    kube,
    keycloak,
    controller,
    close: async () => {
      controller.close();
      await kube.close();
      await keycloak.close();
    },
  };
}
