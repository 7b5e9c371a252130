import ipaddr from 'ipaddr.js';
import type { AddressRange, PlatformContext, Progress, ProjectRef, ProjectSpec } from '../platform.ts';
import { type Driver, isDeleting, LABELS, ownedBy, ownerLabels } from './driver.ts';
import { KINDS, type KubeObject } from './kube.ts';
import { DONE, guard, guardRange, later, readiness, readyMessage } from './progress.ts';

interface Interval {
  start: number;
  end: number;
}

function interval(cidr: string): Interval | undefined {
  try {
    const [address, prefix] = ipaddr.parseCIDR(cidr);
    if (address.kind() !== 'ipv4') return undefined;
    const start = ipaddr.IPv4.networkAddressFromCIDR(cidr)
      .toByteArray()
      .reduce((n, b) => n * 256 + b, 0);
    return { start, end: start + 2 ** (32 - prefix) - 1 };
  } catch {
    return undefined;
  }
}

function cidrOf(start: number, prefix: number): string {
  return `${[24, 16, 8, 0].map((shift) => Math.floor(start / 2 ** shift) % 256).join('.')}/${prefix}`;
}

/** The reservation object's name for a range: one name per range, so creating it is the atomic claim. */
export function reservationName(cidr: string): string {
  return `tenantry-range-${cidr.replaceAll('.', '-').replace('/', '-')}`;
}

/**
 * Reserves a project's range from the operator's pool. The cluster is the record: every Project's
 * `cidrBlock` and every reservation (a ConfigMap per range in the driver's namespace, named after the
 * range) are taken; a free range is claimed by creating its reservation, which only one process can do.
 * A repeat finds the reservation made for this namespace.
 */
export function reserveAddressRange(d: Driver, ctx: PlatformContext, project: ProjectRef): Promise<AddressRange> {
  return guardRange('address range', async (): Promise<AddressRange> => {
    const selector = `${LABELS.rangeFor}=${project.namespace}`;
    const mine = await d.kube.list(KINDS.configMap, d.config.namespace, selector);
    if (mine.length > 0) return { state: 'done', cidr: await keepOne(d, mine) };
    const existing = await d.kube.get(KINDS.project, project.project, project.organization);
    const existingCidr = existing && !isDeleting(existing) ? String(existing.spec?.cidrBlock ?? '') : '';

    const reservations = await d.kube.list(KINDS.configMap, d.config.namespace, LABELS.rangeFor);
    const taken: Interval[] = [];
    for (const cidr of [
      ...reservations.map((r) => r.data?.cidr ?? ''),
      ...(await d.kube.list(KINDS.project)).map((p) => String(p.spec?.cidrBlock ?? '')),
    ]) {
      const range = interval(cidr);
      if (range) taken.push(range);
    }
    const labels = { ...ownerLabels(ctx, project.customerId, project.organization), [LABELS.rangeFor]: project.namespace };
    const claim = async (cidr: string) =>
      d.kube.createIfAbsent({
        ...KINDS.configMap,
        metadata: { name: reservationName(cidr), namespace: d.config.namespace, labels },
        data: { cidr, namespace: project.namespace },
      });
    // A Project made before its reservation (an older run): its range is the one to keep.
    if (existingCidr && (await claim(existingCidr))) return { state: 'done', cidr: existingCidr };

    const size = 2 ** (32 - d.config.projectPrefixLength);
    for (const pool of d.config.addressPool) {
      const range = interval(pool);
      if (!range) continue;
      for (let start = range.start; start + size - 1 <= range.end; start += size) {
        const end = start + size - 1;
        const clash = taken.find((t) => t.start <= end && start <= t.end);
        if (clash) {
          start = range.start + Math.ceil((clash.end + 1 - range.start) / size) * size - size; // on past the taken range
          continue;
        }
        const cidr = cidrOf(start, d.config.projectPrefixLength);
        if (await claim(cidr)) {
          // Two processes may have reserved for the same project at once: the lowest name wins.
          return { state: 'done', cidr: await keepOne(d, await d.kube.list(KINDS.configMap, d.config.namespace, selector)) };
        }
        taken.push({ start, end });
      }
    }
    return { state: 'failed', code: 'NO_ADDRESS_SPACE', message: 'No network address range was left for the project in the address pool.' };
  });
}

/** Of several reservations for one namespace, keeps the lowest-named and releases the rest. */
async function keepOne(d: Driver, reservations: KubeObject[]): Promise<string> {
  const sorted = [...reservations].sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
  for (const extra of sorted.slice(1)) await d.kube.delete(KINDS.configMap, extra.metadata.name ?? '', d.config.namespace);
  return sorted[0]?.data?.cidr ?? '';
}

/** Releases the ranges reserved for a namespace, or for every project namespace of an organization. */
export async function releaseRanges(d: Driver, organization: string, namespace?: string): Promise<void> {
  const selector = namespace ? `${LABELS.rangeFor}=${namespace}` : `${LABELS.organization}=${organization},${LABELS.rangeFor}`;
  for (const reservation of await d.kube.list(KINDS.configMap, d.config.namespace, selector))
    await d.kube.delete(KINDS.configMap, reservation.metadata.name ?? '', d.config.namespace);
}

/**
 * The Project in its organization's namespace with its range and egress type; done when Kube-DC reports
 * it ready with its backing namespace.
 */
export function ensureProject(d: Driver, ctx: PlatformContext, project: ProjectSpec): Promise<Progress> {
  return guard('project', async () => {
    const organization = await d.kube.get(KINDS.organization, project.organization, project.organization);
    if (!organization || isDeleting(organization))
      return { state: 'failed', code: 'UPSTREAM_NOT_FOUND', message: `The organization ${project.organization} is not on the cluster.` };
    let object = await d.kube.get(KINDS.project, project.project, project.organization);
    if (isDeleting(object)) return later(ctx); // an earlier project of this name is still being deleted
    if (object && !ownedBy(object, ctx, project.customerId))
      return {
        state: 'failed',
        code: 'PROVISIONING_FAILED',
        message: `A project ${project.project} not made by Tenantry exists in ${project.organization}.`,
      };
    if (!object) {
      ({ object } = await d.kube.createOrGet({
        ...KINDS.project,
        metadata: {
          name: project.project,
          namespace: project.organization,
          labels: ownerLabels(ctx, project.customerId, project.organization),
        },
        spec: { cidrBlock: project.cidr, egressNetworkType: d.config.egressNetworkType },
      }));
    }
    switch (readiness(object)) {
      case 'ready':
        return object.status?.namespace === undefined || object.status.namespace === project.namespace
          ? DONE
          : {
              state: 'failed',
              code: 'PROVISIONING_FAILED',
              message: `The platform named the project's namespace ${String(object.status.namespace)}, not ${project.namespace}.`,
            };
      case 'failed':
        return {
          state: 'failed',
          code: 'PROVISIONING_FAILED',
          message: `The platform could not set up the project (${readyMessage(object)}).`,
        };
      default:
        return later(ctx);
    }
  });
}

/** Deletes the Project, waits until it and its backing namespace are gone, then releases its range. */
export function deleteProject(d: Driver, ctx: PlatformContext, project: ProjectRef): Promise<Progress> {
  return guard('project deletion', async () => {
    const object = await d.kube.get(KINDS.project, project.project, project.organization);
    if (object && !ownedBy(object, ctx, project.customerId) && !isDeleting(object)) {
      // Not this customer's Project: leave it, but give back the range Tenantry reserved for the namespace.
      await releaseRanges(d, project.organization, project.namespace);
      return DONE;
    }
    if (object) {
      if (!isDeleting(object)) await d.kube.delete(KINDS.project, project.project, project.organization);
      if (await d.kube.get(KINDS.project, project.project, project.organization)) return later(ctx);
    }
    // Kube-DC deletes the backing namespace before it lets the Project go; wait for it if it lingers.
    if (await d.kube.get(KINDS.namespace, project.namespace)) return later(ctx);
    await releaseRanges(d, project.organization, project.namespace);
    return DONE;
  });
}
