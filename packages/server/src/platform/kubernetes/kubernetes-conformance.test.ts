import pino from 'pino';
import { startKubernetesFixture } from '../../../test/kubernetes-platform.ts';
import { PrometheusDouble } from '../../../test/prometheus/index.ts';
import { platformConformance } from '../conformance.ts';
import { createKubernetesPlatform } from './kubernetes-platform.ts';

const GPU_DEVICE = 'nvidia.com/GA100_A100_PCIE_40GB';

/**
 * The kubernetes driver passes the platform conformance suite the sandbox passes: on the Kubernetes
 * double with Kube-DC's controller double, the Keycloak double and a Prometheus double. The cluster acts
 * only when the suite waits (`controller.step()`), and the suite's clock is simulated. Against a real
 * cluster the lifecycle suite (`lifecycle.test.ts`) is the one to run: this harness makes workloads and
 * failures through the doubles.
 */
platformConformance('kubernetes [doubles]', async () => {
  const fixture = await startKubernetesFixture({ gpuProfiles: { 'a100-40gb': GPU_DEVICE }, addressPool: ['10.100.0.0/21'] });
  const { kube: api, controller, keycloak } = fixture;
  if (!api || !controller || !keycloak) throw new Error('the conformance harness runs on the doubles');
  // Prometheus reads the cluster, so the driver that uses it is made once both run.
  const prometheus = await PrometheusDouble.start(api);
  const platform = createKubernetesPlatform(
    { ...fixture.config, metricsUrl: prometheus.url },
    pino({ level: 'silent' }),
    fixture.kubeConfig,
  );
  let nowMs = Date.UTC(2026, 5, 1);
  // 10.100.0.0/21 in /24 ranges (the suite's organizations keep theirs until it ends).
  const addressRanges = 8;
  return {
    platform,
    mode: 'live',
    partnerId: 'conformance',
    addressRanges,
    now: () => new Date(nowMs),
    wait: async (until) => {
      nowMs = Math.max(nowMs, until.getTime());
      controller.step();
    },
    addWorkloads: async (org, workloads) => {
      const namespace = `${org.organization}-default`;
      const gpus = Object.entries(workloads.gpus).flatMap(([, count]) =>
        Array.from({ length: count }, (_, i) => ({ name: `gpu${i}`, deviceName: GPU_DEVICE })),
      );
      for (const [i, name] of workloads.vms.entries())
        api.create({
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachine',
          metadata: { name, namespace },
          spec: { runStrategy: 'Always', template: { spec: { domain: { cpu: { cores: 2 }, devices: { gpus: i === 0 ? gpus : [] } } } } },
        });
      for (const name of workloads.databases)
        api.create({
          apiVersion: 'db.kube-dc.com/v1alpha1',
          kind: 'KdcDatabase',
          metadata: { name, namespace },
          spec: { engine: 'postgresql' },
        });
      controller.step();
    },
    setRequiredActions: async (user, actions) => keycloak.setRequiredActions(user.organization, user.username, actions),
    failNext: async (kind, code) => {
      const status = Number(code.replace('UPSTREAM_', ''));
      const resource = kind === 'customer.create' ? 'organizations' : 'projects';
      // Twice: the failing look and the suite's repeat of it (a refusal the cluster keeps giving).
      api.faults.failNext({ status, count: 2, reason: 'Invalid', match: (r) => r.verb === 'create' && r.resource === resource });
    },
    close: async () => {
      await prometheus.close();
      await fixture.close();
    },
  };
});
