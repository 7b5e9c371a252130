import { hostname } from 'node:os';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Command } from 'commander';
import { CliError } from './operator-client.ts';

interface Flags {
  kubeconfig?: string;
  namespace: string[];
  leaseNamespace?: string;
  leaseName: string;
  identity?: string;
  listen: string;
  resyncSeconds: string;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, ...value.split(',').filter((v) => v.trim() !== '')];
}

/** `tenantry endpoint-manager`: the internal platform endpoints' manager (docs/platform-endpoints.md). */
export function registerEndpointManagerCommand(program: Command): void {
  program
    .command('endpoint-manager')
    .description("keep the internal platform endpoints' slices listing only healthy control-plane nodes (runs in the cluster)")
    .option('--kubeconfig <file>', 'kubeconfig file (default: KUBECONFIG, ~/.kube/config, or the in-cluster service account)')
    .option('--namespace <ns>', 'namespace whose Services to watch (repeatable or comma-separated; default: all)', collect, [])
    .option('--lease-namespace <ns>', 'namespace of the leader-election Lease (default: POD_NAMESPACE, else the first --namespace)')
    .option('--lease-name <name>', 'name of the leader-election Lease', 'tenantry-endpoint-manager')
    .option('--identity <id>', "this replica's name in the Lease (default: POD_NAME or the host name)")
    .option('--listen <host:port>', '/healthz, /readyz and /metrics', '0.0.0.0:8080')
    .option('--resync-seconds <n>', 'full re-list period', '300')
    .action(async (flags: Flags) => {
      const listen = /^(.+):(\d+)$/.exec(flags.listen);
      if (!listen?.[1] || !listen[2]) throw new CliError(`--listen must be host:port, got "${flags.listen}"`, 2);
      if (!/^\d+$/.test(flags.resyncSeconds) || Number(flags.resyncSeconds) < 10)
        throw new CliError(`--resync-seconds must be a whole number of at least 10, got "${flags.resyncSeconds}"`, 2);
      const leaseNamespace = flags.leaseNamespace ?? process.env.POD_NAMESPACE ?? flags.namespace[0];
      if (!leaseNamespace) throw new CliError('--lease-namespace is required when neither POD_NAMESPACE nor --namespace is set', 2);
      // Loaded on demand: the Kubernetes client is not needed by the other commands.
      const { KubeconfigError, loadKubeConfig } = await import('../platform/kubernetes/kubeconfig.ts');
      const { EndpointManager } = await import('../platform-endpoints/manager.ts');
      const { serveManagerHttp } = await import('../platform-endpoints/http.ts');
      let kubeConfig: KubeConfig;
      try {
        kubeConfig = loadKubeConfig({ kubeconfig: flags.kubeconfig });
      } catch (error) {
        if (error instanceof KubeconfigError) throw new CliError(error.message, 2);
        throw error;
      }
      const identity = flags.identity ?? process.env.POD_NAME ?? hostname();
      const log = (message: string) =>
        process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), component: 'endpoint-manager', msg: message })}\n`);
      const manager = new EndpointManager({
        kubeConfig,
        namespaces: flags.namespace,
        leaseNamespace,
        leaseName: flags.leaseName,
        identity,
        resyncMs: Number(flags.resyncSeconds) * 1000,
        log,
      });
      manager.metrics.leader.set(0);
      const { collectDefaultMetrics } = await import('prom-client');
      collectDefaultMetrics({ register: manager.metrics.registry });
      const http = await serveManagerHttp(manager, listen[1], Number(listen[2])).catch((error: Error) => {
        throw new CliError(`cannot listen on ${flags.listen}: ${error.message}`, 1);
      });
      log(
        `watching ${flags.namespace.length > 0 ? flags.namespace.join(', ') : 'all namespaces'} as ${identity}; health and metrics on ${http.url}`,
      );
      manager.start();
      const stop = (signal: string) => {
        log(`${signal} received: releasing the lease and stopping`);
        manager.stop(true).finally(() => http.server.close(() => process.exit(0)));
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
}
