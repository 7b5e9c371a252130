import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { SERVICE_ACCOUNT_DIR } from '../../config/config.ts';

/** No usable cluster configuration: one line saying where it was looked for. The command picks the exit code. */
export class KubeconfigError extends Error {
  override name = 'KubeconfigError';
}

const TOKEN = `${SERVICE_ACCOUNT_DIR}/token`;

/**
 * The cluster a command run by a person talks to, as kubectl finds it: `--kubeconfig`, else KUBECONFIG, else
 * `~/.kube/config`, else the in-cluster service account; `context` picks one of the file's contexts. Where
 * none is found the client's own default would be http://localhost:8080, whose first call fails with "HTTP
 * protocol is not allowed when skipTLSVerify is not set": this says instead where it looked.
 */
export function loadKubeConfig(options: { kubeconfig?: string | undefined; context?: string | undefined }): KubeConfig {
  const kubeConfig = new KubeConfig();
  const home = join(process.env.HOME || homedir(), '.kube', 'config');
  const fromEnvironment = process.env.KUBECONFIG;
  const file = options.kubeconfig || (fromEnvironment ? undefined : existsSync(home) ? home : undefined);
  try {
    if (file) kubeConfig.loadFromFile(file);
    // Several files, separated as the platform separates paths, are merged as kubectl merges them.
    else if (fromEnvironment) kubeConfig.loadFromDefault();
    else if (existsSync(TOKEN) && process.env.KUBERNETES_SERVICE_HOST) kubeConfig.loadFromCluster();
    else throw new KubeconfigError(`no kubeconfig found and not running in a cluster: ${whereLooked(home)}`);
  } catch (error) {
    if (error instanceof KubeconfigError) throw error;
    const source = file ?? `KUBECONFIG (${fromEnvironment})`;
    throw new KubeconfigError(`cannot load the kubeconfig ${source}: ${(error as Error).message}`);
  }
  if (options.context) {
    if (!kubeConfig.getContexts().some((c) => c.name === options.context))
      throw new KubeconfigError(`the kubeconfig has no context "${options.context}"`);
    kubeConfig.setCurrentContext(options.context);
  }
  if (!kubeConfig.getCurrentCluster())
    throw new KubeconfigError('the kubeconfig names no current cluster: give --context, or set one with kubectl config use-context');
  return kubeConfig;
}

function whereLooked(home: string): string {
  const token = existsSync(TOKEN);
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const inCluster =
    token && !host
      ? `a service account token is at ${TOKEN} but KUBERNETES_SERVICE_HOST is not set`
      : !token && host
        ? `KUBERNETES_SERVICE_HOST is set but there is no service account token at ${TOKEN}`
        : `no service account token at ${TOKEN} and KUBERNETES_SERVICE_HOST is not set`;
  return `no --kubeconfig given, KUBECONFIG is not set, ${home} does not exist; ${inCluster}; give --kubeconfig FILE or set KUBECONFIG`;
}
