import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MALLOC_ENV, NODE_FLAGS } from '../../bin/process-settings.js';
import { fallbackOf } from '../../src/config/settings.ts';
import { parseSettings } from '../../src/platform-endpoints/annotations.ts';
import { lint, type RenderedObject, template } from './helm.ts';
import { validateObject } from './schemas.ts';

/** PostgreSQL, with the operator token and the secret key in Secrets the user made (the chart then generates none). */
const SECRETS = {
  serve: {
    database: { secretName: 'tenantry-db' },
    operatorToken: { secretName: 'tenantry-operator' },
    secretKey: { secretName: 'tenantry-secret-key' },
  },
};

function values(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...SECRETS, ...extra, serve: { ...SECRETS.serve, ...((extra.serve as object) ?? {}) } };
}

function render(extra: Record<string, unknown> = {}): RenderedObject[] {
  const { objects, error } = template(values(extra));
  assert.equal(error, undefined, error ?? '');
  for (const object of objects) validateObject(object);
  return objects;
}

function find(objects: RenderedObject[], kind: string, name: string, namespace?: string): RenderedObject {
  const found = objects.find(
    (o) => o.kind === kind && o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace),
  );
  assert.ok(found, `${kind} ${namespace ?? ''}/${name} is rendered`);
  return found;
}

function inventory(objects: RenderedObject[]): string[] {
  return objects.map((o) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`).sort();
}

const BOTH_ENABLED = {
  platform: { hostnames: { kubeAPI: 'kube.example.com', console: 'console.example.com' } },
  platformEndpoints: { kubeAPI: { enabled: true, vip: '192.0.2.10' }, edgeGateway: { enabled: true, vip: '192.0.2.11' } },
};

describe('chart: rendered with the real helm, every object validated against its schema', () => {
  test('helm lint --strict passes with the defaults and with both endpoints enabled', () => {
    for (const v of [values(), values(BOTH_ENABLED)]) {
      const result = lint(v);
      assert.equal(result.status, 0, result.stdout + result.stderr);
    }
  });

  test('defaults: tenantry serve only; no platform endpoint, no manager, no platform-driver RBAC', () => {
    const objects = render();
    assert.deepEqual(inventory(objects), [
      'ConfigMap tenantry/tenantry',
      'Deployment tenantry/tenantry',
      'Service tenantry/tenantry',
      'Service tenantry/tenantry-operator',
      'ServiceAccount tenantry/tenantry',
    ]);
    const deployment = find(objects, 'Deployment', 'tenantry') as unknown as {
      spec: {
        replicas: number;
        template: {
          spec: {
            automountServiceAccountToken: boolean;
            containers: Array<{ args: string[]; env: Array<{ name: string; valueFrom: { secretKeyRef: { name: string; key: string } } }> }>;
          };
        };
      };
    };
    assert.equal(deployment.spec.replicas, 2);
    const container = deployment.spec.template.spec.containers[0];
    assert.deepEqual(container?.args, ['serve']);
    assert.deepEqual(
      container?.env.map((e) => [e.name, e.valueFrom.secretKeyRef.name, e.valueFrom.secretKeyRef.key]),
      [
        ['TENANTRY_DATABASE_URL', 'tenantry-db', 'url'],
        ['TENANTRY_OPERATOR_TOKEN', 'tenantry-operator', 'token'],
        ['TENANTRY_SECRET_KEY', 'tenantry-secret-key', 'key'],
      ],
    );
    assert.equal(deployment.spec.template.spec.automountServiceAccountToken, false);
    const config = find(objects, 'ConfigMap', 'tenantry') as unknown as { data: Record<string, string> };
    assert.equal(config.data.TENANTRY_LISTEN, '0.0.0.0:8080');
    assert.equal(config.data.TENANTRY_OPERATOR_LISTEN, '0.0.0.0:8081');
    // Started as `npm start` and the tests start it (bin/process-settings.js).
    assert.equal(config.data.NODE_OPTIONS, NODE_FLAGS.join(' '));
    assert.equal(config.data.MALLOC_MMAP_THRESHOLD_, MALLOC_ENV.MALLOC_MMAP_THRESHOLD_);
    assert.equal(config.data.MALLOC_ARENA_MAX, MALLOC_ENV.MALLOC_ARENA_MAX);
    // The server's own default; 0 (off, for PgBouncer) is rendered, not dropped.
    assert.equal(config.data.TENANTRY_DATABASE_STATEMENT_CACHE, fallbackOf('TENANTRY_DATABASE_STATEMENT_CACHE'));
    assert.equal(config.data.TENANTRY_DATABASE_POOL_SIZE, fallbackOf('TENANTRY_DATABASE_POOL_SIZE'));
    const pooled = find(
      render({ serve: { database: { secretName: 'tenantry-db', statementCache: 0, poolSize: 30 } } }),
      'ConfigMap',
      'tenantry',
    ) as unknown as { data: Record<string, string> };
    assert.equal(pooled.data.TENANTRY_DATABASE_STATEMENT_CACHE, '0');
    assert.equal(pooled.data.TENANTRY_DATABASE_POOL_SIZE, '30');
  });

  test('the cluster API endpoint enabled: pool, advertisement, selector-less Service, manager with least privilege', () => {
    const objects = render({ platformEndpoints: { kubeAPI: { enabled: true, vip: '192.0.2.10' } } });
    assert.deepEqual(inventory(objects), [
      'ClusterRole /tenantry-endpoint-manager-nodes',
      'ClusterRoleBinding /tenantry-endpoint-manager-nodes',
      'ConfigMap tenantry/tenantry',
      'Deployment tenantry/tenantry',
      'Deployment tenantry/tenantry-endpoint-manager',
      'IPAddressPool metallb-system/kube-api-platform',
      'L2Advertisement metallb-system/kube-api-platform',
      'Lease tenantry/tenantry-endpoint-manager',
      'Role kube-system/tenantry-endpoint-manager',
      'Role tenantry/tenantry-endpoint-manager-lease',
      'RoleBinding kube-system/tenantry-endpoint-manager',
      'RoleBinding tenantry/tenantry-endpoint-manager-lease',
      'Service kube-system/kube-api-platform',
      'Service tenantry/tenantry',
      'Service tenantry/tenantry-operator',
      'ServiceAccount tenantry/tenantry',
      'ServiceAccount tenantry/tenantry-endpoint-manager',
    ]);
    assert.deepEqual(find(objects, 'IPAddressPool', 'kube-api-platform').spec, { addresses: ['192.0.2.10/32'], autoAssign: false });
    assert.deepEqual(find(objects, 'L2Advertisement', 'kube-api-platform').spec, {
      ipAddressPools: ['kube-api-platform'],
      interfaces: ['br-ext-cloud'],
    });
    const service = find(objects, 'Service', 'kube-api-platform', 'kube-system');
    const spec = service.spec as Record<string, unknown>;
    assert.equal(spec.selector, undefined, 'no pod selector');
    assert.equal(spec.type, 'LoadBalancer');
    assert.equal(spec.loadBalancerClass, 'metallb.io/l2');
    assert.equal(spec.loadBalancerIP, '192.0.2.10');
    assert.deepEqual(spec.ports, [{ name: 'https', protocol: 'TCP', port: 6443, targetPort: 6443 }]);
    assert.deepEqual(service.metadata.annotations, {
      'metallb.io/address-pool': 'kube-api-platform',
      'tenantry.io/backend-source': 'node-control-plane',
      'tenantry.io/backend-node-selector': 'node-role.kubernetes.io/control-plane=',
      'tenantry.io/backend-address-type': 'InternalIP',
      'tenantry.io/health-scheme': 'https',
      'tenantry.io/health-path': '/readyz',
      'tenantry.io/health-port': '6443',
      'tenantry.io/health-host': '',
      'tenantry.io/health-interval-seconds': '5',
      'tenantry.io/health-timeout-seconds': '2',
      'tenantry.io/health-failure-threshold': '2',
      'tenantry.io/health-success-threshold': '1',
      'tenantry.io/health-insecure-skip-verify': 'true',
      'tenantry.io/health-status-max': '',
    });
    // The contract between the chart and the manager: what one writes, the other reads as the seed says.
    const settings = parseSettings(service.metadata.annotations ?? {});
    assert.deepEqual(
      { ...settings.health },
      {
        scheme: 'https',
        path: '/readyz',
        port: 6443,
        host: undefined,
        intervalMs: 5000,
        timeoutMs: 2000,
        failureThreshold: 2,
        successThreshold: 1,
        insecureSkipVerify: true,
        statusMax: 499,
      },
    );

    const manager = find(objects, 'Deployment', 'tenantry-endpoint-manager') as unknown as {
      spec: { replicas: number; template: { spec: { serviceAccountName: string; containers: Array<{ args: string[] }> } } };
    };
    assert.equal(manager.spec.replicas, 2);
    assert.equal(manager.spec.template.spec.serviceAccountName, 'tenantry-endpoint-manager');
    assert.deepEqual(manager.spec.template.spec.containers[0]?.args, [
      'endpoint-manager',
      '--namespace=kube-system',
      '--lease-namespace=tenantry',
      '--lease-name=tenantry-endpoint-manager',
      '--listen=0.0.0.0:8080',
      '--resync-seconds=300',
    ]);
    const rules = (o: RenderedObject) =>
      (o.rules as Array<{ apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }>).map(
        (r) => `${r.apiGroups.join()}|${r.resources.join()}|${r.verbs.join()}|${r.resourceNames?.join() ?? ''}`,
      );
    assert.deepEqual(rules(find(objects, 'ClusterRole', 'tenantry-endpoint-manager-nodes')), ['|nodes|get,list,watch|']);
    assert.deepEqual(rules(find(objects, 'Role', 'tenantry-endpoint-manager', 'kube-system')), [
      '|services|get,list,watch|',
      '|services/finalizers|update|',
      'discovery.k8s.io|endpointslices|get,list,watch,create,update,delete|',
      '|events|create,patch|',
    ]);
    assert.deepEqual(rules(find(objects, 'Role', 'tenantry-endpoint-manager-lease', 'tenantry')), [
      'coordination.k8s.io|leases|get,update|tenantry-endpoint-manager',
    ]);
  });

  test('both endpoints: the gateway probes the console host by default; Roles in both namespaces', () => {
    const objects = render(BOTH_ENABLED);
    const gateway = find(objects, 'Service', 'edge-gateway-platform', 'envoy-gateway-system');
    assert.equal(gateway.metadata.annotations?.['tenantry.io/health-host'], 'console.example.com');
    assert.equal(gateway.metadata.annotations?.['tenantry.io/health-path'], '/');
    assert.equal(gateway.metadata.annotations?.['tenantry.io/health-port'], '443');
    assert.equal(gateway.metadata.annotations?.['tenantry.io/health-status-max'], '499');
    assert.deepEqual((gateway.spec as { ports: unknown }).ports, [{ name: 'https', protocol: 'TCP', port: 443, targetPort: 443 }]);
    assert.equal(parseSettings(gateway.metadata.annotations ?? {}).health.host, 'console.example.com');
    find(objects, 'IPAddressPool', 'edge-gateway-platform', 'metallb-system');
    find(objects, 'L2Advertisement', 'edge-gateway-platform', 'metallb-system');
    find(objects, 'Role', 'tenantry-endpoint-manager', 'kube-system');
    find(objects, 'Role', 'tenantry-endpoint-manager', 'envoy-gateway-system');
    const manager = find(objects, 'Deployment', 'tenantry-endpoint-manager') as unknown as {
      spec: { template: { spec: { containers: Array<{ args: string[] }> } } };
    };
    assert.ok(manager.spec.template.spec.containers[0]?.args.includes('--namespace=kube-system,envoy-gateway-system'));
  });

  test('every field of the settings table reaches the Service', () => {
    const objects = render({
      platform: { hostnames: { kubeAPI: 'kube.example.com' } },
      platformEndpoints: {
        metallbNamespace: 'lb',
        edgeGateway: {
          enabled: true,
          name: 'gw-internal',
          namespace: 'gateway',
          vip: '198.51.100.7',
          pool: 'gw-pool',
          interface: 'br-ext',
          loadBalancerClass: 'example.com/l2',
          port: 8443,
          backend: {
            nodeSelector: { 'node-role.kubernetes.io/control-plane': 'true', zone: 'a' },
            addressType: 'ExternalIP',
            health: {
              scheme: 'https',
              path: '/healthz',
              port: 9443,
              host: 'login.example.com',
              intervalSeconds: 3,
              timeoutSeconds: 1,
              failureThreshold: 3,
              successThreshold: 2,
              insecureSkipVerify: false,
              statusMax: 399,
            },
          },
        },
      },
    });
    const service = find(objects, 'Service', 'gw-internal', 'gateway');
    const settings = parseSettings(service.metadata.annotations ?? {});
    assert.deepEqual(settings.nodeSelector, [
      { key: 'node-role.kubernetes.io/control-plane', value: 'true' },
      { key: 'zone', value: 'a' },
    ]);
    assert.equal(settings.addressType, 'ExternalIP');
    assert.deepEqual(
      { ...settings.health },
      {
        scheme: 'https',
        path: '/healthz',
        port: 9443,
        host: 'login.example.com',
        intervalMs: 3000,
        timeoutMs: 1000,
        failureThreshold: 3,
        successThreshold: 2,
        insecureSkipVerify: false,
        statusMax: 399,
      },
    );
    assert.equal((service.spec as { loadBalancerClass: string }).loadBalancerClass, 'example.com/l2');
    assert.deepEqual(find(objects, 'IPAddressPool', 'gw-pool', 'lb').spec, { addresses: ['198.51.100.7/32'], autoAssign: false });
    assert.deepEqual(find(objects, 'L2Advertisement', 'gw-pool', 'lb').spec, { ipAddressPools: ['gw-pool'], interfaces: ['br-ext'] });
    assert.equal(objects.filter((o) => o.metadata.name === 'kube-api-platform').length, 0, 'the disabled endpoint renders nothing');
  });

  test('advertisementMode bgp: a BGPAdvertisement of the VIP alone, to the named peers or to every peer', () => {
    const objects = render({
      platformEndpoints: {
        kubeAPI: { enabled: true, vip: '192.0.2.10', advertisementMode: 'bgp', bgpPeers: ['tor-a', 'tor-b'] },
        edgeGateway: { enabled: true, vip: '192.0.2.11', advertisementMode: 'bgp', backend: { health: { host: 'console.example.com' } } },
      },
    });
    assert.deepEqual(find(objects, 'BGPAdvertisement', 'kube-api-platform', 'metallb-system').spec, {
      ipAddressPools: ['kube-api-platform'],
      aggregationLength: 32,
      peers: ['tor-a', 'tor-b'],
    });
    assert.deepEqual(find(objects, 'BGPAdvertisement', 'edge-gateway-platform', 'metallb-system').spec, {
      ipAddressPools: ['edge-gateway-platform'],
      aggregationLength: 32,
    });
    assert.equal(objects.filter((o) => o.kind === 'L2Advertisement').length, 0, 'no ARP announcement besides');
    find(objects, 'IPAddressPool', 'kube-api-platform', 'metallb-system');
  });

  test("the kubernetes platform driver's RBAC: empty by default, rendered for the serve ServiceAccount when given", () => {
    const objects = render({
      platformDriver: {
        kubernetes: { rbac: { clusterRules: [{ apiGroups: ['kube-dc.com'], resources: ['organizations'], verbs: ['get'] }] } },
      },
    });
    const binding = find(objects, 'ClusterRoleBinding', 'tenantry-platform-driver') as unknown as {
      subjects: Array<{ name: string; namespace: string }>;
    };
    assert.deepEqual(
      binding.subjects.map((s) => `${s.namespace}/${s.name}`),
      ['tenantry/tenantry'],
    );
    find(objects, 'ClusterRole', 'tenantry-platform-driver');
    assert.equal(find(objects, 'ServiceAccount', 'tenantry').automountServiceAccountToken, true);
  });

  test('rendering fails with a clear message for an incomplete or wrong configuration', () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [
        { platformEndpoints: { kubeAPI: { enabled: true } } },
        /platformEndpoints\.kubeAPI\.enabled is true but platformEndpoints\.kubeAPI\.vip is empty/,
      ],
      [
        { platformEndpoints: { kubeAPI: { enabled: true, vip: '192.0.2.10/32' } } },
        /platformEndpoints\.kubeAPI\.vip must be one IPv4 address/,
      ],
      [
        { platformEndpoints: { edgeGateway: { enabled: true } } },
        /platformEndpoints\.edgeGateway\.enabled is true but platformEndpoints\.edgeGateway\.vip is empty/,
      ],
      [
        { platformEndpoints: { edgeGateway: { enabled: true, vip: '192.0.2.11' } } },
        /platformEndpoints\.edgeGateway\.backend\.health\.host is required/,
      ],
      [
        {
          platform: { hostnames: { kubeAPI: 'kube.example.com' } },
          platformEndpoints: { edgeGateway: { enabled: true, vip: '192.0.2.11', backend: { health: { host: 'KUBE.example.com' } } } },
        },
        /health\.host is "KUBE\.example\.com", the cluster API hostname: that is a TLS pass-through route/,
      ],
      [{ platformEndpoints: { kubeAPI: { enabled: true, vip: '192.0.2.10', loadBalancerClass: '' } } }, /loadBalancerClass is empty/],
    ];
    for (const [extra, message] of cases) {
      const { error } = template(values(extra));
      assert.match(error ?? 'rendered without error', message);
    }
  });
});
