/**
 * Kube-DC's ValidatingAdmissionPolicies, as Helm renders them (test/kube-dc/policies/, README there), created
 * in the double so that its admission refuses what a Kube-DC cluster refuses.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { KubeApi } from './index.ts';
import type { KubeObject } from './store.ts';

const POLICIES = join(dirname(fileURLToPath(import.meta.url)), '../kube-dc/policies');

/** Rendered on every install: annotation protection and the reserved ResourceQuotas. */
export const KUBE_DC_DEFAULT_POLICY_FILES = ['vap-protect-annotations.yaml', 'vap-protect-resource-quotas.yaml'];
/** Rendered only with gpu.enabled and an enabled vm profile (gpu-values.yaml in the same folder). */
export const KUBE_DC_GPU_POLICY_FILE = 'vap-gpu-virtualmachines.yaml';

/** The objects of one rendered file. */
export function kubeDcPolicyObjects(file: string): KubeObject[] {
  return parseAllDocuments(readFileSync(join(POLICIES, file), 'utf8'))
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((o): o is KubeObject => o !== null);
}

/**
 * Creates Kube-DC's default policies and bindings (and the GPU VM ones with `gpu: true`) as the cluster
 * admin; returns what was created.
 */
export function installKubeDcPolicies(kube: KubeApi, options: { gpu?: boolean } = {}): KubeObject[] {
  const files = [...KUBE_DC_DEFAULT_POLICY_FILES, ...(options.gpu ? [KUBE_DC_GPU_POLICY_FILE] : [])];
  return files.flatMap((file) => kubeDcPolicyObjects(file).map((object) => kube.create(object)));
}
