import { refuseInTransaction } from '../../infra/db/transactions.ts';
import type { PlatformContext, UsageSubject, UsageTotals } from '../platform.ts';
import type { Driver } from './driver.ts';

/** The namespace label kube-state-metrics must export (`--metric-labels-allowlist=namespaces=[kube-dc.com/organization]`). */
const ORG_LABEL = 'label_kube_dc_com_organization';
const STEP_S = 60;
const GIB = 2 ** 30;

/** kube-state-metrics writes a resource name with `.` and `/` as `_`. */
export function metricResource(device: string): string {
  return device.replace(/[./-]/g, '_');
}

/** A sum over the window of a per-namespace series joined to the namespace's organization label, in resource-hours. */
function hoursQuery(series: string, organization: string, windowS: number): string {
  const joined = `(${series} * on(namespace) group_left(${ORG_LABEL}) kube_namespace_labels{${ORG_LABEL}="${organization}"})`;
  return `sum(sum_over_time(sum(${joined})[${windowS}s:${STEP_S}s])) * ${STEP_S} / 3600`;
}

interface PromVector {
  status?: string;
  data?: { resultType?: string; result?: Array<{ value?: [number, string] }> };
}

/**
 * Resource-hours from Prometheus (TENANTRY_METRICS_URL): kube-state-metrics' requests of the pods in each
 * organization's namespaces (a KubeVirt VM is its launcher pod), sampled each minute over the customer's
 * part of the window. Undefined when no source is configured or it cannot be read: the caller answers
 * UNAVAILABLE rather than a wrong number.
 */
export async function usage(
  d: Driver,
  _ctx: PlatformContext,
  customers: UsageSubject[],
  from: Date,
  to: Date,
): Promise<Map<string, UsageTotals> | undefined> {
  const base = d.config.metricsUrl;
  if (!base) return undefined;
  // Before the try below, which turns Prometheus's failures into "unavailable": this one is a bug.
  refuseInTransaction('Prometheus');
  const query = async (promql: string, at: Date): Promise<number> => {
    const response = await fetch(`${base}/api/v1/query?${new URLSearchParams({ query: promql, time: String(at.getTime() / 1000) })}`, {
      signal: AbortSignal.timeout(15_000),
    });
    if (!response.ok) throw new Error(`Prometheus answered HTTP ${response.status}`);
    const body = (await response.json()) as PromVector;
    if (body.status !== 'success') throw new Error('Prometheus answered no success');
    return (body.data?.result ?? []).reduce((sum, sample) => sum + Number(sample.value?.[1] ?? 0), 0);
  };
  const totals = new Map<string, UsageTotals>();
  try {
    for (const customer of customers) {
      const start = Math.max(from.getTime(), customer.since.getTime());
      const end = Math.min(to.getTime(), customer.until?.getTime() ?? to.getTime());
      const total: UsageTotals = { vcpu_hours: 0, memory_gib_hours: 0, storage_gib_hours: 0, gpu_hours: {} };
      totals.set(customer.customerId, total);
      const windowS = Math.floor((end - start) / 1000);
      if (windowS < STEP_S) continue;
      const at = new Date(end);
      const org = customer.organization;
      total.vcpu_hours = await query(hoursQuery('kube_pod_container_resource_requests{resource="cpu"}', org, windowS), at);
      total.memory_gib_hours = (await query(hoursQuery('kube_pod_container_resource_requests{resource="memory"}', org, windowS), at)) / GIB;
      total.storage_gib_hours =
        (await query(hoursQuery('kube_persistentvolumeclaim_resource_requests_storage_bytes', org, windowS), at)) / GIB;
      for (const [profile, device] of Object.entries(d.config.gpuProfiles)) {
        const hours = await query(
          hoursQuery(`kube_pod_container_resource_requests{resource="${metricResource(device)}"}`, org, windowS),
          at,
        );
        if (hours > 0) total.gpu_hours[profile] = hours;
      }
    }
  } catch (error) {
    d.logger.warn({ err: error }, 'usage: the metrics source cannot be read');
    return undefined;
  }
  return totals;
}
