import type { Logger } from 'pino';
import { ConfigError } from '../infra/errors/config-error.ts';
import { KubernetesConfigErrors, type KubernetesPlatformConfig, loadKubernetesConfig } from './kubernetes/config.ts';
import type { Platform } from './platform.ts';

/**
 * A platform driver as the server starts it: the value of TENANTRY_PLATFORM that selects it, the settings it
 * reads from the environment, and how its live platform is made. The list below is the one place a driver
 * is named: the configuration, the server and the image catalogue ask it rather than a closed set of names.
 */
export interface PlatformDriver<Settings = unknown> {
  readonly name: string;
  /** Reads and checks the driver's settings; throws a ConfigError listing every problem, each naming its variable. */
  readSettings(get: (name: string) => string | undefined): Settings;
  /** Live mode's platform; absent: live mode stays on the sandbox. Called once, at start. */
  live?(settings: Settings, logger: Logger): Promise<Platform>;
  /** The cluster whose Kube-DC `images-configmap` holds the OS image catalogue, when the driver runs on one. */
  imageCluster?(settings: Settings): { kubeconfig: string | undefined; namespace: string };
}

const sandbox: PlatformDriver<undefined> = {
  name: 'sandbox',
  readSettings: () => undefined,
};

const kubernetes: PlatformDriver<KubernetesPlatformConfig> = {
  name: 'kubernetes',
  readSettings(get) {
    try {
      return loadKubernetesConfig(get);
    } catch (error) {
      if (!(error instanceof KubernetesConfigErrors)) throw error;
      const [first, ...rest] = error.problems;
      throw new ConfigError(first?.variable ?? 'TENANTRY_PLATFORM', first?.problem ?? 'invalid', rest);
    }
  },
  async live(settings, logger) {
    // Loaded only when chosen: the Kubernetes client is large, and a sandbox-only start-up never needs it.
    const { createKubernetesPlatform } = await import('./kubernetes/kubernetes-platform.ts');
    return createKubernetesPlatform(settings, logger);
  },
  imageCluster: (settings) => ({ kubeconfig: settings.kubeconfig, namespace: settings.kubeDcNamespace }),
};

/** Every driver, in the order TENANTRY_PLATFORM's error message lists them. */
export const platformDrivers: readonly PlatformDriver[] = [sandbox, kubernetes];

export function platformDriver(name: string): PlatformDriver {
  const driver = platformDrivers.find((d) => d.name === name);
  if (!driver) throw new Error(`no platform driver named "${name}"`);
  return driver;
}
