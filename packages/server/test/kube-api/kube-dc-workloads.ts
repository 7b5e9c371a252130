import type { KubeApi } from './index.ts';
import { launcherRefusal } from './kube-dc-plans.ts';
import type { KubeObject } from './store.ts';

const VM = ['kubevirt.io/v1', 'VirtualMachine'] as const;
const DATABASE = ['db.kube-dc.com/v1alpha1', 'KdcDatabase'] as const;
const CNPG = ['postgresql.cnpg.io/v1', 'Cluster'] as const;

/** What the controller double lends the workload reconciles: the store, its clock and its status writer. */
export interface WorkloadsReconciler {
  kube: KubeApi;
  now: () => Date;
  setStatus(kind: readonly [string, string], object: KubeObject, status: Record<string, unknown>): void;
}

/**
 * KubeVirt (a VM's `runStrategy` gives its status; a launcher pod the LimitRanger refuses is reported on
 * the `Synchronized` condition) and Kube-DC's databases (a postgresql one gets its CloudNativePG Cluster;
 * it reports no ready instance while that Cluster hibernates).
 */
export function reconcileVirtualMachine(r: WorkloadsReconciler, namespace: string, name: string): void {
  const vm = r.kube.tryGet(...VM, name, namespace);
  if (!vm || vm.metadata.deletionTimestamp) return;
  const spec = (vm.spec ?? {}) as { runStrategy?: string; running?: boolean };
  const running = spec.runStrategy ? spec.runStrategy !== 'Halted' : spec.running !== false;
  const refused = running ? launcherRefusal(vm, r.kube.list('v1', 'LimitRange', namespace)) : undefined;
  if (refused) {
    // KubeVirt reports a launcher pod the API server refused on the VM's Synchronized condition.
    const message = `pods "virt-launcher-${name}-x7k2p" is forbidden: ${refused}`;
    r.setStatus(VM, vm, {
      created: false,
      ready: false,
      printableStatus: 'Stopped',
      conditions: [{ type: 'Synchronized', status: 'False', reason: 'FailedCreate', message, lastTransitionTime: r.now().toISOString() }],
    });
    return;
  }
  r.setStatus(VM, vm, { created: running, ready: running, printableStatus: running ? 'Running' : 'Stopped', conditions: [] });
}

export function reconcileDatabase(r: WorkloadsReconciler, namespace: string, name: string): void {
  const db = r.kube.tryGet(...DATABASE, name, namespace);
  if (!db || db.metadata.deletionTimestamp) return;
  const spec = (db.spec ?? {}) as { engine?: string; replicas?: number };
  const replicas = spec.replicas ?? 2;
  let hibernated = false;
  if ((spec.engine ?? 'postgresql') === 'postgresql') {
    let cluster = r.kube.tryGet(...CNPG, name, namespace);
    if (!cluster) {
      cluster = r.kube.create({
        apiVersion: CNPG[0],
        kind: CNPG[1],
        metadata: {
          name,
          namespace,
          ownerReferences: [{ apiVersion: DATABASE[0], kind: DATABASE[1], name, uid: db.metadata.uid ?? '', controller: true }],
        },
        spec: { instances: replicas },
      });
    }
    hibernated = cluster.metadata.annotations?.['cnpg.io/hibernation'] === 'on';
  }
  r.setStatus(DATABASE, db, { phase: 'Ready', instances: replicas, readyInstances: hibernated ? 0 : replicas });
}
