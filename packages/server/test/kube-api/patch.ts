import fastJsonPatch, { type Operation } from 'fast-json-patch';

/** The patch bodies a client may send, by Content-Type. */
export type PatchType = 'json' | 'merge' | 'strategic' | 'apply';

export function patchTypeOf(contentType: string | undefined): PatchType | undefined {
  const base = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
  switch (base) {
    case 'application/json-patch+json':
      return 'json';
    case 'application/merge-patch+json':
      return 'merge';
    case 'application/strategic-merge-patch+json':
      return 'strategic';
    case 'application/apply-patch+yaml':
      return 'apply';
    default:
      return undefined;
  }
}

export class PatchError extends Error {}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(value: unknown): value is Record<string, Json> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** RFC 7386 JSON merge patch: objects merge, null deletes, anything else (arrays included) replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const result: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete result[k];
    else result[k] = mergePatch(result[k], v);
  }
  return result;
}

// The merge keys Kubernetes declares for the lists patched most often (containers, env, ports, volumes,
// conditions, addresses). A real server reads them from the Go types; the double guesses from the elements.
const MERGE_KEYS = ['name', 'type', 'port', 'containerPort', 'mountPath', 'ip'];

function mergeKeyFor(a: unknown[], b: unknown[]): string | undefined {
  const all = [...a, ...b];
  if (all.length === 0 || !all.every(isObject)) return undefined;
  return MERGE_KEYS.find((k) => all.every((item) => (item as Record<string, unknown>)[k] !== undefined));
}

/**
 * Strategic merge patch, simplified: a merge patch in which lists of objects that share a merge key are
 * merged element by element (an element `{"$patch": "delete", <key>: ...}` removes one), and
 * `"$patch": "replace"` on an object replaces it whole. Other directives are not supported.
 */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  if (Array.isArray(patch) && Array.isArray(target)) {
    const mergeKey = mergeKeyFor(target, patch);
    if (!mergeKey) return patch;
    const result = [...target] as Array<Record<string, unknown>>;
    for (const item of patch as Array<Record<string, unknown>>) {
      const index = result.findIndex((existing) => existing[mergeKey] === item[mergeKey]);
      if (item.$patch === 'delete') {
        if (index >= 0) result.splice(index, 1);
      } else if (index >= 0) result[index] = strategicMergePatch(result[index], item) as Record<string, unknown>;
      else result.push(item);
    }
    return result;
  }
  if (!isObject(patch)) return patch;
  if (patch.$patch === 'replace') {
    const { $patch: _directive, ...rest } = patch;
    return rest;
  }
  const result: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$patch') continue;
    if (v === null) delete result[k];
    else result[k] = strategicMergePatch(result[k], v);
  }
  return result;
}

/** Applies a patch of the given type; throws PatchError for a body the server would reject. */
export function applyPatch(type: PatchType, target: Record<string, unknown>, body: unknown): Record<string, unknown> {
  switch (type) {
    case 'json': {
      if (!Array.isArray(body)) throw new PatchError('a JSON patch must be an array of operations');
      try {
        const copy = structuredClone(target);
        return fastJsonPatch.applyPatch(copy, body as Operation[], true, true).newDocument;
      } catch (error) {
        throw new PatchError(`the JSON patch cannot be applied: ${(error as Error).message.split('\n')[0]}`);
      }
    }
    case 'merge':
      if (!isObject(body)) throw new PatchError('a merge patch must be a JSON object');
      return mergePatch(target, body) as Record<string, unknown>;
    case 'strategic':
      if (!isObject(body)) throw new PatchError('a strategic merge patch must be a JSON object');
      return strategicMergePatch(target, body) as Record<string, unknown>;
    case 'apply':
      // Server-side apply without field ownership: the applied configuration is merged in.
      if (!isObject(body)) throw new PatchError('an apply patch must be an object');
      return strategicMergePatch(target, body) as Record<string, unknown>;
  }
}
