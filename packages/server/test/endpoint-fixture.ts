import assert from 'node:assert/strict';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { ManualScheduler } from '../src/infra/scheduler.ts';
import { EndpointManager } from '../src/platform-endpoints/manager.ts';
import { type ControlPlaneNode, type NodeBehaviour, startControlPlane } from './control-plane.ts';
import { KubeApi, type KubeObject } from './kube-api/index.ts';

export const CONTROL_PLANE_LABEL = 'node-role.kubernetes.io/control-plane';

/** The annotations the chart renders for an endpoint (docs/platform-endpoints.md), on the fake nodes' port. */
export function endpointAnnotations(port: number, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    'tenantry.io/backend-source': 'node-control-plane',
    'tenantry.io/backend-node-selector': `${CONTROL_PLANE_LABEL}=`,
    'tenantry.io/backend-address-type': 'InternalIP',
    'tenantry.io/health-scheme': 'https',
    'tenantry.io/health-path': '/readyz',
    'tenantry.io/health-port': String(port),
    'tenantry.io/health-host': '',
    'tenantry.io/health-interval-seconds': '5',
    'tenantry.io/health-timeout-seconds': '2',
    'tenantry.io/health-failure-threshold': '2',
    'tenantry.io/health-success-threshold': '1',
    'tenantry.io/health-insecure-skip-verify': 'true',
    'tenantry.io/health-status-max': '',
    ...overrides,
  };
}

export interface EndpointWorld {
  kube: KubeApi;
  nodes: ControlPlaneNode[];
  scheduler: ManualScheduler;
  managers: EndpointManager[];
  startManager(identity: string, options?: Partial<ConstructorParameters<typeof EndpointManager>[0]>): EndpointManager;
  createService(name: string, namespace: string, annotations: Record<string, string>, port?: number): KubeObject;
  slice(name: string, namespace: string): V1EndpointSlice | undefined;
  /** The node names in a slice, sorted. */
  ready(name: string, namespace: string): string[] | undefined;
  events(name: string, namespace: string): Array<{ reason: string; message: string; type: string }>;
  close(): Promise<void>;
}

/** The double, three fake control-plane nodes registered as Nodes, and a manual clock for the managers. */
export async function endpointWorld(
  behaviours: [NodeBehaviour, NodeBehaviour, NodeBehaviour],
  listeners: string[] = [],
): Promise<EndpointWorld> {
  const kube = await KubeApi.start();
  const nodes = await startControlPlane(behaviours, listeners);
  const scheduler = new ManualScheduler();
  for (const [i, node] of nodes.entries()) {
    kube.create({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: `cp-${i + 1}`, labels: { [CONTROL_PLANE_LABEL]: '', 'kubernetes.io/hostname': `cp-${i + 1}` } },
      status: {
        addresses: [
          { type: 'InternalIP', address: node.address },
          { type: 'Hostname', address: `cp-${i + 1}` },
        ],
      },
    });
  }
  kube.create({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'worker-1' },
    status: { addresses: [{ type: 'InternalIP', address: '127.0.0.9' }] },
  });
  kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'envoy-gateway-system' } });
  const managers: EndpointManager[] = [];
  const world: EndpointWorld = {
    kube,
    nodes,
    scheduler,
    managers,
    startManager(identity, options = {}) {
      const manager = new EndpointManager({
        kubeConfig: kube.kubeConfig(identity),
        namespaces: ['kube-system', 'envoy-gateway-system'],
        leaseNamespace: 'kube-system',
        leaseName: 'tenantry-endpoint-manager',
        identity,
        scheduler,
        log: () => undefined,
        ...options,
      });
      manager.start();
      managers.push(manager);
      return manager;
    },
    createService(name, namespace, annotations, port = 6443) {
      return kube.create({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace, annotations },
        spec: {
          type: 'LoadBalancer',
          loadBalancerClass: 'metallb.io/metallb',
          ports: [{ name: 'https', port, targetPort: port, protocol: 'TCP' }],
        },
      });
    },
    slice(name, namespace) {
      return kube.tryGet('discovery.k8s.io/v1', 'EndpointSlice', `${name}-mgr`, namespace) as V1EndpointSlice | undefined;
    },
    ready(name, namespace) {
      const slice = world.slice(name, namespace);
      if (!slice) return undefined;
      return (slice.endpoints ?? [])
        .filter((e) => e.conditions?.ready)
        .map((e) => e.nodeName ?? '')
        .sort();
    },
    events(name, namespace) {
      return kube
        .list('v1', 'Event', namespace)
        .filter((e) => (e.involvedObject as { name: string }).name === name)
        .map((e) => ({ reason: e.reason as string, message: e.message as string, type: e.type as string }));
    },
    async close() {
      for (const manager of managers) await manager.stop(false);
      for (const node of nodes) await node.stop();
      await kube.close();
    },
  };
  return world;
}

/** Polls a condition that real network events (watch streams) make true; never used to prove an absence. */
export async function eventually(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) assert.fail(`timed out waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
