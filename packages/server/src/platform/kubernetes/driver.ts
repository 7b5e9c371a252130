import type { Logger } from 'pino';
import type { PlatformContext } from '../platform.ts';
import type { KubernetesPlatformConfig } from './config.ts';
import type { KeycloakAdmin } from './keycloak.ts';
import type { KubeClient, KubeObject } from './kube.ts';

/** What every part of the driver works with: the two APIs, the configuration and a logger. */
export interface Driver {
  kube: KubeClient;
  /** The client whose writes Kube-DC's admission takes as its own namespace's (Organization annotations). */
  kubeDcWriter: KubeClient;
  idp: KeycloakAdmin;
  config: KubernetesPlatformConfig;
  logger: Logger;
}

export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  partner: 'tenantry.io/partner',
  mode: 'tenantry.io/mode',
  customer: 'tenantry.io/customer',
  organization: 'tenantry.io/organization',
  /** On an address-range reservation: the project namespace it is for. */
  rangeFor: 'tenantry.io/range-for',
} as const;

export const ANNOTATIONS = {
  planId: 'billing.kube-dc.com/plan-id',
  subscription: 'billing.kube-dc.com/subscription',
  /** On a VM or database that suspend stopped: what to restore on resume. */
  stoppedBySuspend: 'tenantry.io/stopped-by-suspend',
  hibernation: 'cnpg.io/hibernation',
} as const;

/** The labels that say an object is this customer's (and Tenantry's). */
export function ownerLabels(ctx: PlatformContext, customerId: string, organization: string): Record<string, string> {
  return {
    [LABELS.managedBy]: 'tenantry',
    [LABELS.partner]: ctx.partnerId,
    [LABELS.mode]: ctx.mode,
    [LABELS.customer]: customerId,
    [LABELS.organization]: organization,
  };
}

/** Whether an existing object was made by Tenantry for this very customer (names are unique, but check). */
export function ownedBy(object: KubeObject, ctx: PlatformContext, customerId: string): boolean {
  const labels = object.metadata.labels ?? {};
  return (
    labels[LABELS.managedBy] === 'tenantry' &&
    labels[LABELS.partner] === ctx.partnerId &&
    labels[LABELS.customer] === customerId &&
    labels[LABELS.mode] === ctx.mode
  );
}

export function isDeleting(object: KubeObject | undefined): boolean {
  return object?.metadata.deletionTimestamp !== undefined && object.metadata.deletionTimestamp !== null;
}
