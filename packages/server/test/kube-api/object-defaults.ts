import { isDeepStrictEqual } from 'node:util';
import type { ResourceType } from './registry.ts';
import type { KubeObject } from './store-types.ts';

/** An object as JSON would carry it, without its version: two of them are equal when a write changes nothing. */
export function comparable(object: KubeObject): unknown {
  return asJson({ ...object, metadata: { ...object.metadata, resourceVersion: '' } });
}

export function asJson(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

export function withoutMetaAndStatus(object: KubeObject): Record<string, unknown> {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = object;
  return rest;
}

let nextClusterIp = 10;

/** The defaults a real server fills in that clients commonly read back. */
export function applyDefaults(type: ResourceType, object: KubeObject): void {
  if (type.group === '' && type.kind === 'Namespace') object.status = { phase: 'Active', ...((object.status as object) ?? {}) };
  if (type.group === '' && type.kind === 'Service') {
    object.spec ??= {};
    const spec = object.spec as Record<string, unknown>;
    spec.type ??= 'ClusterIP';
    if (spec.type !== 'ExternalName' && spec.clusterIP === undefined) {
      nextClusterIp += 1;
      spec.clusterIP = `10.96.${Math.floor(nextClusterIp / 250)}.${nextClusterIp % 250}`;
      spec.clusterIPs = [spec.clusterIP];
    }
  }
}

/**
 * The object an update stores before validation: the status alone for the /status subresource; otherwise
 * the new object with what the server owns kept (a uid, when given, must match: validation says so), the
 * status kept when it has its own subresource, and `generation` moved on a change outside metadata and status.
 */
export function mergeUpdate(type: ResourceType, current: KubeObject, next: KubeObject, subresource: 'status' | undefined): KubeObject {
  next.metadata ??= {};
  let merged: KubeObject;
  if (subresource === 'status') merged = { ...structuredClone(current), status: next.status };
  else {
    merged = next;
    // A given uid must be the object's; the rest of what the server owns is kept whatever the client sent.
    if (merged.metadata.uid === undefined || merged.metadata.uid === '') delete merged.metadata.uid;
    for (const field of ['creationTimestamp', 'namespace', 'deletionTimestamp', 'generation', ...(merged.metadata.uid ? [] : ['uid'])]) {
      const value = (current.metadata as Record<string, unknown>)[field];
      if (value === undefined) delete (merged.metadata as Record<string, unknown>)[field];
      else (merged.metadata as Record<string, unknown>)[field] = value;
    }
    if (type.statusSubresource) {
      if (current.status === undefined) delete merged.status;
      else merged.status = structuredClone(current.status);
    }
    if (!isDeepStrictEqual(asJson(withoutMetaAndStatus(merged)), asJson(withoutMetaAndStatus(current))))
      merged.metadata.generation = (current.metadata.generation ?? 1) + 1;
  }
  return merged;
}
