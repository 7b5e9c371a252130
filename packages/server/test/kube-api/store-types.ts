import type { ResourceType } from './registry.ts';

/**
 * The shapes the object store deals in, and the interface of its write paths to admission: who writes
 * (RequestUser), how (WriteContext: dry run, field validation, warnings back), and what a validating
 * admission hook sees of a write (AdmissionRequest). `store.ts` re-exports them.
 */

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: Array<{
    apiVersion: string;
    kind: string;
    name: string;
    uid: string;
    controller?: boolean;
    blockOwnerDeletion?: boolean;
  }>;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One change, kept in the history so that a watch can resume from any version still in it. */
export interface Change {
  resourceVersion: number;
  type: ChangeType;
  resource: ResourceType;
  object: KubeObject;
  /** The object before the change (MODIFIED, DELETED): a filtered watch needs it to turn moves into ADDED/DELETED. */
  old: KubeObject | undefined;
}

/** Who makes a request: the authenticated user (or the one impersonated), with its groups. */
export interface RequestUser {
  username: string;
  groups: string[];
}

/** What a write carries beyond its object: the user, and the query parameters that change how it is done. */
export interface WriteContext {
  user?: RequestUser;
  dryRun?: boolean;
  fieldValidation?: 'Strict' | 'Warn' | 'Ignore';
  /** warnings to send back as Warning headers */
  warnings?: string[];
}

/** What validating admission sees of a write, as in admission.k8s.io/v1 AdmissionRequest. */
export interface AdmissionRequest {
  operation: 'CREATE' | 'UPDATE' | 'DELETE';
  type: ResourceType;
  subresource?: string;
  namespace?: string;
  name: string;
  object?: KubeObject;
  oldObject?: KubeObject;
  user: RequestUser;
  dryRun: boolean;
  /** The write's Warning headers, for a hook that warns instead of denying. */
  warnings?: string[];
}

/** Validating admission: called after defaulting and schema validation, before anything is stored; throws a KubeApiError to deny. */
export type AdmissionHook = (request: AdmissionRequest) => void;

/** The user of an in-process write that names none: a cluster admin, as a suite seeding objects is. */
export const DEFAULT_USER: RequestUser = { username: 'admin', groups: ['system:masters'] };
/** The controllers that delete on a cluster's behalf write as their service accounts (kube-controller-manager). */
export const GARBAGE_COLLECTOR: RequestUser = {
  username: 'system:serviceaccount:kube-system:generic-garbage-collector',
  groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
};
export const NAMESPACE_CONTROLLER: RequestUser = {
  username: 'system:serviceaccount:kube-system:namespace-controller',
  groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
};

export interface ListOptions {
  labelSelector?: string | null;
  fieldSelector?: string | null;
  limit?: number;
  continue?: string | null;
}

/** What the hooks see of a write: the request, its user (an admin for in-process writes), dry run and warnings. */
export function admissionRequest(request: Omit<AdmissionRequest, 'user' | 'dryRun'>, context: WriteContext | undefined): AdmissionRequest {
  return {
    ...request,
    user: context?.user ?? DEFAULT_USER,
    dryRun: context?.dryRun ?? false,
    ...(context?.warnings ? { warnings: context.warnings } : {}),
  };
}
