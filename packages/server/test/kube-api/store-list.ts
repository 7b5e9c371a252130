import { apiVersionOf, type ResourceType } from './registry.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';
import type { KubeObject, ListOptions } from './store-types.ts';

/**
 * One page of a list: the objects under `prefix` (a type's storage keys, in key order) in the namespace
 * and selectors asked for, at most `limit` of them, with the continue token of the next page.
 */
export function listPage(
  objects: Map<string, KubeObject>,
  prefix: string,
  type: ResourceType,
  namespace: string | undefined,
  options: ListOptions,
): { items: KubeObject[]; continue?: string } {
  const labels = parseLabelSelector(options.labelSelector);
  const fields = parseFieldSelector(options.fieldSelector);
  const after = options.continue ? Buffer.from(options.continue, 'base64url').toString() : '';
  const keys = [...objects.keys()].filter((k) => k.startsWith(prefix) && k > after).sort();
  const items: KubeObject[] = [];
  let next: string | undefined;
  let lastKey = '';
  for (const k of keys) {
    const object = objects.get(k) as KubeObject;
    if (type.namespaced && namespace !== undefined && object.metadata.namespace !== namespace) continue;
    if (!labels(object.metadata.labels) || !fields({ ...object, apiVersion: apiVersionOf(type), kind: type.kind })) continue;
    if (options.limit && items.length === options.limit) {
      next = Buffer.from(lastKey).toString('base64url');
      break;
    }
    items.push(structuredClone(object));
    lastKey = k;
  }
  return { items, ...(next ? { continue: next } : {}) };
}
