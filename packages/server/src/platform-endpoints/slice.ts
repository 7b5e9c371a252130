import { isIP } from 'node:net';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';

export const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';
export const MANAGED_BY = 'endpoint-manager.tenantry.io';
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

export interface Backend {
  nodeName: string;
  address: string;
}

export function sliceName(serviceName: string): string {
  return `${serviceName}-mgr`;
}

/** Backends in a stable order, so that the same set always renders the same slice. */
export function sortBackends(backends: Backend[]): Backend[] {
  return [...backends].sort((a, b) => a.address.localeCompare(b.address) || a.nodeName.localeCompare(b.nodeName));
}

/**
 * The slice the manager wants for a Service: its healthy backends only, each ready and on its node, the
 * Service's ports (target ports, which equal the ports for these selector-less Services), owned by the Service
 * so that deleting the Service collects the slice.
 */
export function desiredSlice(service: V1Service, backends: Backend[]): V1EndpointSlice {
  const sorted = sortBackends(backends);
  const family = sorted.some((b) => isIP(b.address) === 6) ? 'IPv6' : 'IPv4';
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: sliceName(service.metadata?.name ?? ''),
      namespace: service.metadata?.namespace ?? '',
      labels: { [SERVICE_NAME_LABEL]: service.metadata?.name ?? '', [MANAGED_BY_LABEL]: MANAGED_BY },
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Service',
          name: service.metadata?.name ?? '',
          uid: service.metadata?.uid ?? '',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    addressType: family,
    endpoints: sorted.map((b) => ({
      addresses: [b.address],
      nodeName: b.nodeName,
      conditions: { ready: true, serving: true, terminating: false },
    })),
    ports: (service.spec?.ports ?? []).map((p) => ({
      ...(p.name ? { name: p.name } : {}),
      port: typeof p.targetPort === 'number' ? p.targetPort : p.port,
      protocol: p.protocol ?? 'TCP',
      ...(p.appProtocol ? { appProtocol: p.appProtocol } : {}),
    })),
  };
}

/** Whether an existing slice already says what the desired one says (then nothing is written). */
export function sliceMatches(existing: V1EndpointSlice, desired: V1EndpointSlice): boolean {
  const view = (s: V1EndpointSlice) =>
    JSON.stringify({
      labels: Object.fromEntries(
        Object.entries(s.metadata?.labels ?? {}).filter(([k]) => k === MANAGED_BY_LABEL || k === SERVICE_NAME_LABEL),
      ),
      owner: (s.metadata?.ownerReferences ?? []).map((o) => o.uid),
      addressType: s.addressType,
      endpoints: (s.endpoints ?? []).map((e) => [e.addresses, e.nodeName, e.conditions?.ready === true]),
      ports: (s.ports ?? []).map((p) => [p.name ?? '', p.port, p.protocol ?? 'TCP']),
    });
  return view(existing) === view(desired);
}

/** The backends an existing slice lists as ready (a new leader starts from them). */
export function readyBackends(slice: V1EndpointSlice | undefined): Backend[] {
  return (slice?.endpoints ?? [])
    .filter((e) => e.conditions?.ready !== false)
    .flatMap((e) => e.addresses.map((address) => ({ address, nodeName: e.nodeName ?? '' })));
}
