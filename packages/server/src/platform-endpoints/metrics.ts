import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The manager's Prometheus metrics, on a registry of its own (one per manager, so tests can run several). */
export class EndpointMetrics {
  readonly registry = new Registry();
  readonly probes = new Counter({
    name: 'tenantry_endpoint_probe_total',
    help: 'Health probes of backend nodes, by result.',
    labelNames: ['service', 'node', 'result'] as const,
    registers: [this.registry],
  });
  readonly probeSeconds = new Histogram({
    name: 'tenantry_endpoint_probe_duration_seconds',
    help: 'Time a health probe took (connect, TLS, response headers).',
    labelNames: ['service', 'node'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
    registers: [this.registry],
  });
  readonly backendHealthy = new Gauge({
    name: 'tenantry_endpoint_backend_healthy',
    help: '1 when the node is in the endpoint slice (healthy by the thresholds), 0 when not.',
    labelNames: ['service', 'node'] as const,
    registers: [this.registry],
  });
  readonly sliceEndpoints = new Gauge({
    name: 'tenantry_endpoint_slice_endpoints',
    help: "Ready endpoints the manager last wrote to the Service's slice.",
    labelNames: ['service'] as const,
    registers: [this.registry],
  });
  readonly sliceWrites = new Counter({
    name: 'tenantry_endpoint_slice_writes_total',
    help: 'Endpoint slice creations, updates and deletions.',
    labelNames: ['service', 'operation'] as const,
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: 'tenantry_endpoint_manager_leader',
    help: '1 while this replica holds the leader lease.',
    registers: [this.registry],
  });
  readonly apiErrors = new Counter({
    name: 'tenantry_endpoint_manager_api_errors_total',
    help: 'Failed Kubernetes API calls and watches, by operation.',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  /** Forgets a Service's series once it is no longer managed. */
  forgetService(service: string, nodes: string[]): void {
    this.sliceEndpoints.remove({ service });
    for (const node of nodes) {
      this.backendHealthy.remove({ service, node });
      this.probeSeconds.remove({ service, node });
      for (const result of ['success', 'failure']) this.probes.remove({ service, node, result });
    }
  }
}
