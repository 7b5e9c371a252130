import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KubeApi } from '../kube-api/index.ts';

const GIB = 2 ** 30;

/**
 * A Prometheus double: the instant-query API (`GET /api/v1/query`) answering the kubernetes driver's
 * usage queries from the Kubernetes double's current state. It reads the organization, the resource and
 * the window from the query and answers "what runs now, as if it had run the whole window": a running
 * VirtualMachine in a namespace labelled with the organization requests its `domain.cpu.cores` (1 by
 * default), `domain.memory.guest` (1Gi by default) and one of each GPU device it lists.
 *
 * It is not a PromQL engine and keeps no history: tests that need a VM stopped part-way through a window
 * belong against a real Prometheus (docs/platform-kubernetes.md, "Running the suite against a real cluster").
 */
export class PrometheusDouble {
  readonly url: string;
  readonly #server: Server;
  /** Queries answered, newest last. */
  readonly queries: string[] = [];

  private constructor(server: Server) {
    this.#server = server;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  static async start(kube: KubeApi): Promise<PrometheusDouble> {
    let double: PrometheusDouble | undefined;
    const server = createServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://prometheus');
      const query = url.searchParams.get('query');
      if (url.pathname !== '/api/v1/query' || query === null) {
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ status: 'error', errorType: 'bad_data', error: 'only instant queries are served' }));
        return;
      }
      double?.queries.push(query);
      const value = answer(kube, query);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({ status: 'success', data: { resultType: 'vector', result: [{ metric: {}, value: [0, String(value)] }] } }),
      );
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    double = new PrometheusDouble(server);
    return double;
  }

  close(): Promise<void> {
    return new Promise((ok) => this.#server.close(() => ok()));
  }
}

function answer(kube: KubeApi, query: string): number {
  const organization = /label_kube_dc_com_organization="([^"]*)"/.exec(query)?.[1];
  const windowS = Number(/\[(\d+)s:\d+s\]/.exec(query)?.[1] ?? 0);
  const resource = /resource="([^"]*)"/.exec(query)?.[1];
  if (organization === undefined || resource === undefined) return 0;
  let perHour = 0;
  for (const namespace of kube.list('v1', 'Namespace')) {
    if (namespace.metadata?.labels?.['kube-dc.com/organization'] !== organization) continue;
    for (const vm of kube.list('kubevirt.io/v1', 'VirtualMachine', namespace.metadata.name)) {
      const spec = (vm.spec ?? {}) as { runStrategy?: string; running?: boolean; template?: { spec?: { domain?: Domain } } };
      const runs = typeof spec.runStrategy === 'string' ? spec.runStrategy !== 'Halted' : spec.running !== false;
      if (!runs) continue;
      const domain = spec.template?.spec?.domain ?? {};
      if (resource === 'cpu') perHour += domain.cpu?.cores ?? 1;
      else if (resource === 'memory') perHour += gibibytes(domain.memory?.guest ?? '1Gi') * GIB;
      else perHour += (domain.devices?.gpus ?? []).filter((gpu) => metricName(gpu.deviceName ?? '') === resource).length;
    }
  }
  return (perHour * windowS) / 3600;
}

interface Domain {
  cpu?: { cores?: number };
  memory?: { guest?: string };
  devices?: { gpus?: Array<{ deviceName?: string }> };
}

const metricName = (device: string) => device.replace(/[./-]/g, '_');

function gibibytes(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Mi|Gi|Ti)?$/.exec(quantity);
  if (!match) return 1;
  const scale = { Mi: 1 / 1024, Gi: 1, Ti: 1024 }[match[2] ?? 'Gi'] ?? 1;
  return Number(match[1]) * scale;
}
