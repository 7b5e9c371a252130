import type { KubeObject } from './kube.ts';

const SCALE: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  m: 1e-3,
};

/** A Kubernetes quantity ("8Gi", "500m", "1.5", "2G") as a plain number; undefined when it is not one. */
export function quantity(value: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P|m)?$/.exec(value.trim());
  if (!match) return undefined;
  return Number(match[1]) * (SCALE[match[2] ?? ''] ?? 1);
}

/** A Kubernetes quantity in GiB (a bare number is bytes); 0 when it is not one. */
export function gibibytes(value: string): number {
  return (quantity(value) ?? 0) / 2 ** 30;
}

/**
 * Why a namespace's LimitRanges refuse a pod whose one container asks (and is limited to) `cpu` cores and
 * `memoryGib` GiB, in the words the API server's LimitRanger uses; undefined when they admit it. Kube-DC
 * writes each plan's limits as the LimitRange `default-resource-limits`, which HNC copies into every
 * project namespace; a VM's launcher pod is admitted by it.
 */
export function limitRangeProblem(limitRanges: KubeObject[], asked: { cpu: number; memoryGib: number }): string | undefined {
  const wanted = { cpu: asked.cpu, memory: asked.memoryGib * 2 ** 30 };
  for (const range of limitRanges) {
    const limits = ((range.spec?.limits as Array<Record<string, unknown>> | undefined) ?? []).filter(
      (limit) => limit.type === 'Container' || limit.type === 'Pod',
    );
    for (const limit of limits) {
      const per = limit.type === 'Container' ? 'Container' : 'Pod';
      for (const resource of ['cpu', 'memory'] as const) {
        const max = (limit.max as Record<string, string> | undefined)?.[resource];
        const maxValue = max === undefined ? undefined : quantity(max);
        if (maxValue !== undefined && wanted[resource] > maxValue)
          return `maximum ${resource} usage per ${per} is ${max}, but limit is ${show(resource, wanted[resource])} (LimitRange ${range.metadata.name ?? ''})`;
        const min = (limit.min as Record<string, string> | undefined)?.[resource];
        const minValue = min === undefined ? undefined : quantity(min);
        if (minValue !== undefined && wanted[resource] < minValue)
          return `minimum ${resource} usage per ${per} is ${min}, but request is ${show(resource, wanted[resource])} (LimitRange ${range.metadata.name ?? ''})`;
      }
    }
  }
  return undefined;
}

function show(resource: 'cpu' | 'memory', value: number): string {
  return resource === 'cpu' ? String(value) : `${value / 2 ** 30}Gi`;
}
