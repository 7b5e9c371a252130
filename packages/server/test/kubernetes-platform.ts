import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import type { KubernetesPlatformConfig } from '../src/platform/kubernetes/config.ts';
import { createKubernetesPlatform, type KubernetesPlatform } from '../src/platform/kubernetes/kubernetes-platform.ts';
import type { PlatformContext, Progress } from '../src/platform/platform.ts';
import type { KeycloakDouble } from './keycloak/index.ts';
import type { KubeApi } from './kube-api/index.ts';
import type { KubeDcController } from './kube-api/kube-dc-controller.ts';
import { DRIVER_USER, PLAN_WRITER, startKubeDcCluster } from './kube-dc-cluster.ts';

/**
 * The kubernetes platform driver wired to the doubles (the Kubernetes API with Kube-DC and its controller
 * double, the Keycloak admin API), or to a real cluster and identity provider when the operator gives
 * TENANTRY_TEST_KUBECONFIG, TENANTRY_TEST_IDP_URL and TENANTRY_TEST_IDP_CLIENT_SECRET (see
 * docs/platform-kubernetes.md, "Running the suite against a real cluster").
 */
export interface KubernetesFixture {
  platform: KubernetesPlatform;
  config: KubernetesPlatformConfig;
  /** Present only on the doubles. */
  kube: KubeApi | undefined;
  controller: KubeDcController | undefined;
  keycloak: KeycloakDouble | undefined;
  kubeConfig: KubeConfig;
  /** Lets the cluster act (the controller double's queued work, or a short wait on a real cluster). */
  settle(): Promise<void>;
  /** A fresh driver on the same cluster: what a restarted process (after kill -9) has. */
  restart(): KubernetesPlatform;
  close(): Promise<void>;
}

export const REAL_CLUSTER = process.env.TENANTRY_TEST_KUBECONFIG !== undefined;

export async function startKubernetesFixture(overrides: Partial<KubernetesPlatformConfig> = {}): Promise<KubernetesFixture> {
  const logger = pino({ level: 'silent' });
  const dir = mkdtempSync(join(tmpdir(), 'tenantry-k8s-'));
  if (REAL_CLUSTER) {
    for (const variable of ['TENANTRY_TEST_IDP_URL', 'TENANTRY_TEST_IDP_CLIENT_SECRET'])
      if (!process.env[variable]) throw new Error(`${variable} is required with TENANTRY_TEST_KUBECONFIG (docs/platform-kubernetes.md)`);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(process.env.TENANTRY_TEST_KUBECONFIG ?? '');
    const config = baseConfig({
      kubeconfig: process.env.TENANTRY_TEST_KUBECONFIG,
      namespace: process.env.TENANTRY_TEST_NAMESPACE ?? 'tenantry',
      identity: {
        ...baseConfig().identity,
        url: process.env.TENANTRY_TEST_IDP_URL ?? '',
        adminRealm: process.env.TENANTRY_TEST_IDP_ADMIN_REALM ?? 'master',
        clientId: process.env.TENANTRY_TEST_IDP_CLIENT_ID ?? 'tenantry',
        clientSecret: process.env.TENANTRY_TEST_IDP_CLIENT_SECRET ?? '',
      },
      addressPool: (process.env.TENANTRY_TEST_ADDRESS_POOL ?? '10.250.0.0/20').split(','),
      kubeDcNamespace: process.env.TENANTRY_TEST_KUBE_DC_NAMESPACE ?? 'kube-dc',
      kubeDcServiceAccount: process.env.TENANTRY_TEST_KUBE_DC_SERVICE_ACCOUNT,
      ...overrides,
    });
    return {
      platform: createKubernetesPlatform(config, logger, kubeConfig),
      config,
      kube: undefined,
      controller: undefined,
      keycloak: undefined,
      kubeConfig,
      settle: () => new Promise((ok) => setTimeout(ok, 2000)),
      restart: () => createKubernetesPlatform(config, logger, kubeConfig),
      close: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const cluster = await startKubeDcCluster({ running: false });
  const { kube, controller, keycloak } = cluster;
  const secretFile = join(dir, 'client-secret');
  writeFileSync(secretFile, keycloak.credentials.clientSecret, { mode: 0o600 });
  // The driver as the chart deploys it: the `tenantry` service account, with the chart's RBAC only.
  const kubeConfig = kube.kubeConfig(DRIVER_USER);
  const config = baseConfig({
    identity: { ...baseConfig().identity, url: keycloak.url, ...keycloak.credentials },
    kubeDcServiceAccount: PLAN_WRITER,
    ...overrides,
  });
  return {
    platform: createKubernetesPlatform(config, logger, kubeConfig),
    config,
    kube,
    controller,
    keycloak,
    kubeConfig,
    settle: async () => {
      controller.step();
    },
    restart: () => createKubernetesPlatform(config, logger, kube.kubeConfig(DRIVER_USER)),
    close: async () => {
      await cluster.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function baseConfig(overrides: Partial<KubernetesPlatformConfig> = {}): KubernetesPlatformConfig {
  return {
    kubeconfig: undefined,
    namespace: 'tenantry',
    identity: {
      url: 'http://127.0.0.1:1',
      adminRealm: 'master',
      clientId: 'tenantry',
      clientSecret: 'unset',
      login: 'impersonation',
      loginClientId: 'kube-dc',
      loginRedirectUrl: 'https://console.example.test/',
    },
    addressPool: ['10.100.0.0/22'],
    projectPrefixLength: 24,
    egressNetworkType: 'cloud',
    metricsUrl: undefined,
    gpuProfiles: { 'nvidia-a10': 'nvidia.com/GA102GL_A10' },
    organizationEmail: 'platform+{organization}@tenantry.invalid',
    kubeDcNamespace: 'kube-dc',
    kubeDcServiceAccount: undefined,
    vmStorageClass: undefined,
    ...overrides,
  };
}

export function context(partnerId = 'p-one', now = new Date()): PlatformContext {
  return { partnerId, mode: 'live', now };
}

/**
 * Asks again until the step reports done or failed, letting the cluster act between looks, as the
 * operation engine does. Answers every Progress seen, the last one final.
 */
export async function drive(fixture: KubernetesFixture, step: () => Promise<Progress>, looks = 30): Promise<Progress[]> {
  const seen: Progress[] = [];
  for (let look = 0; look < looks; look += 1) {
    const progress = await step();
    seen.push(progress);
    if (progress.state === 'done' || progress.state === 'failed') return seen;
    await fixture.settle();
  }
  return seen;
}
