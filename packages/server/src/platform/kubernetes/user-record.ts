import type { PlatformContext } from '../platform.ts';
import { type Driver, ownerLabels } from './driver.ts';
import { KINDS } from './kube.ts';

/** What the record holds for a user whose creation was asked but not yet seen done. */
export const CREATING = 'creating';

/**
 * The realm users Tenantry made for one organization, recorded on the cluster as a ConfigMap in the
 * driver's namespace (`tenantry-users-<organization>`, username → Keycloak user id), as address ranges
 * are. Keycloak 26 drops user attributes its realm's user profile does not declare, and Kube-DC's
 * realms declare none, so a user cannot carry the mark itself. The name is written (`creating`) before
 * the user is created, so a process killed between the two still knows the user it finds is its own.
 */
export function recordName(organization: string): string {
  return `tenantry-users-${organization}`;
}

export async function readUserRecord(d: Driver, organization: string): Promise<Record<string, string>> {
  const record = await d.kube.get(KINDS.configMap, recordName(organization), d.config.namespace);
  return record?.data ?? {};
}

/** Sets (or, with null, removes) one user's entry, making the record on first use. */
export async function recordUser(
  d: Driver,
  ctx: PlatformContext,
  ref: { customerId: string; organization: string },
  username: string,
  value: string | null,
): Promise<void> {
  const name = recordName(ref.organization);
  if (value !== null) {
    const labels = ownerLabels(ctx, ref.customerId, ref.organization);
    const created = await d.kube.createIfAbsent({
      ...KINDS.configMap,
      metadata: { name, namespace: d.config.namespace, labels },
      data: { [username]: value },
    });
    if (created) return;
  } else if (!(await d.kube.get(KINDS.configMap, name, d.config.namespace))) return;
  await d.kube.mergePatch(KINDS.configMap, name, d.config.namespace, { data: { [username]: value } });
}

/** Removes the organization's record once its realm is gone with it. */
export async function dropUserRecord(d: Driver, organization: string): Promise<void> {
  await d.kube.delete(KINDS.configMap, recordName(organization), d.config.namespace);
}
