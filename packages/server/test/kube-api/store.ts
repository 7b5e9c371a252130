import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { errors } from './errors.ts';
import { applyPatch, type PatchType } from './patch.ts';
import { apiVersionOf, type ResourceRegistry, type ResourceType } from './registry.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';

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

export interface ListOptions {
  labelSelector?: string | null;
  fieldSelector?: string | null;
  limit?: number;
  continue?: string | null;
}

const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Namespaces every cluster has. */
const SYSTEM_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

function storageKey(type: ResourceType): string {
  return `${type.group}/${type.plural}`;
}

/**
 * The objects of the double and the rules every write follows: resourceVersion, uid, generation,
 * optimistic concurrency, the status subresource, finalizers and garbage collection through
 * ownerReferences. The HTTP server calls it; suites and controller doubles may call it in-process too.
 */
export class ObjectStore {
  readonly registry: ResourceRegistry;
  readonly #objects = new Map<string, KubeObject>();
  readonly #history: Change[] = [];
  readonly #listeners = new Set<(change: Change) => void>();
  readonly #historyLimit: number;
  readonly #now: () => Date;
  #version = 1;
  /** Changes at or below this version are no longer in the history (compacted). */
  #compactedTo = 1;
  readonly requireNamespaces: boolean;

  constructor(registry: ResourceRegistry, options: { historyLimit?: number; now?: () => Date; requireNamespaces?: boolean } = {}) {
    this.registry = registry;
    this.#historyLimit = options.historyLimit ?? 10_000;
    this.#now = options.now ?? (() => new Date());
    this.requireNamespaces = options.requireNamespaces ?? true;
    const namespaceType = this.#type('v1', 'Namespace');
    for (const name of SYSTEM_NAMESPACES) this.create(namespaceType, undefined, { metadata: { name } });
  }

  get resourceVersion(): number {
    return this.#version;
  }

  /** Called synchronously after every change (for controller doubles and for watches). */
  subscribe(listener: (change: Change) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Changes after `since`, or undefined when the history no longer reaches back that far (410 Gone). */
  changesSince(since: number): Change[] | undefined {
    if (since < this.#compactedTo) return undefined;
    return this.#history.filter((c) => c.resourceVersion > since);
  }

  /** Forgets the history, as etcd compaction does: watches resuming from an older version get 410 Gone. */
  compact(): void {
    this.#history.length = 0;
    this.#compactedTo = this.#version;
  }

  #type(apiVersion: string, kind: string): ResourceType {
    const type = this.registry.findByKind(apiVersion, kind);
    if (!type) throw errors.badRequest(`no kind "${kind}" is registered for version "${apiVersion}"`);
    return type;
  }

  /** The registered type of an object, by its apiVersion and kind. */
  typeOf(object: Pick<KubeObject, 'apiVersion' | 'kind'>): ResourceType {
    return this.#type(object.apiVersion ?? '', object.kind ?? '');
  }

  #key(type: ResourceType, namespace: string | undefined, name: string): string {
    return `${storageKey(type)}|${type.namespaced ? (namespace ?? '') : ''}|${name}`;
  }

  #present(type: ResourceType, object: KubeObject): KubeObject {
    return { ...structuredClone(object), apiVersion: apiVersionOf(type), kind: type.kind };
  }

  #record(type: ChangeType, resource: ResourceType, object: KubeObject, old: KubeObject | undefined): void {
    const change: Change = { resourceVersion: this.#version, type, resource, object: structuredClone(object), old };
    this.#history.push(change);
    if (this.#history.length > this.#historyLimit) {
      const dropped = this.#history.shift();
      if (dropped) this.#compactedTo = dropped.resourceVersion;
    }
    for (const listener of this.#listeners) listener(change);
  }

  #nextVersion(): string {
    this.#version += 1;
    return String(this.#version);
  }

  get(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const found = this.#objects.get(this.#key(type, namespace, name));
    if (!found) throw errors.notFound({ group: type.group, plural: type.plural, name });
    return this.#present(type, found);
  }

  list(
    type: ResourceType,
    namespace: string | undefined,
    options: ListOptions = {},
  ): { items: KubeObject[]; resourceVersion: string; continue?: string } {
    const labels = parseLabelSelector(options.labelSelector);
    const fields = parseFieldSelector(options.fieldSelector);
    const prefix = `${storageKey(type)}|`;
    const after = options.continue ? Buffer.from(options.continue, 'base64url').toString() : '';
    const keys = [...this.#objects.keys()].filter((k) => k.startsWith(prefix) && k > after).sort();
    const items: KubeObject[] = [];
    let next: string | undefined;
    let lastKey = '';
    for (const k of keys) {
      const object = this.#objects.get(k) as KubeObject;
      if (type.namespaced && namespace !== undefined && object.metadata.namespace !== namespace) continue;
      if (!labels(object.metadata.labels) || !fields(this.#present(type, object))) continue;
      if (options.limit && items.length === options.limit) {
        next = Buffer.from(lastKey).toString('base64url');
        break;
      }
      items.push(structuredClone(object));
      lastKey = k;
    }
    return { items, resourceVersion: String(this.#version), ...(next ? { continue: next } : {}) };
  }

  #keyOf(type: ResourceType, object: KubeObject): string {
    return this.#key(type, object.metadata.namespace, object.metadata.name ?? '');
  }

  #validate(type: ResourceType, object: KubeObject): void {
    const name = object.metadata.name ?? '';
    if (name.length > 253 || !NAME.test(name))
      throw errors.invalid(
        type.kind,
        name,
        'metadata.name',
        `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'`,
      );
  }

  create(type: ResourceType, namespace: string | undefined, input: KubeObject): KubeObject {
    const object = structuredClone(input) as KubeObject;
    object.metadata ??= {};
    if (type.namespaced) {
      const ns = namespace ?? object.metadata.namespace;
      if (!ns) throw errors.badRequest('the namespace of the object must be given');
      if (object.metadata.namespace && object.metadata.namespace !== ns)
        throw errors.badRequest('the namespace of the provided object does not match the namespace sent on the request');
      object.metadata.namespace = ns;
      if (this.requireNamespaces && !this.#objects.has(this.#key(this.#type('v1', 'Namespace'), undefined, ns)))
        throw errors.notFound({ group: '', plural: 'namespaces', name: ns });
    } else delete object.metadata.namespace;
    if (!object.metadata.name && object.metadata.generateName)
      object.metadata.name = `${object.metadata.generateName}${randomUUID().replaceAll('-', '').slice(0, 5)}`;
    this.#validate(type, object);
    const key = this.#keyOf(type, object);
    if (this.#objects.has(key)) throw errors.alreadyExists({ group: type.group, plural: type.plural, name: object.metadata.name ?? '' });
    object.apiVersion = apiVersionOf(type);
    object.kind = type.kind;
    object.metadata.uid = randomUUID();
    object.metadata.creationTimestamp = this.#now()
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
    object.metadata.generation = 1;
    delete object.metadata.deletionTimestamp;
    applyDefaults(type, object);
    object.metadata.resourceVersion = this.#nextVersion();
    this.#objects.set(key, object);
    if (type.kind === 'CustomResourceDefinition') this.registry.registerDefinition(object);
    this.#record('ADDED', type, object, undefined);
    return this.#present(type, object);
  }

  /** PUT semantics: replaces the object (or only its status), guarded by resourceVersion when one is given. */
  update(type: ResourceType, namespace: string | undefined, name: string, input: KubeObject, subresource?: 'status'): KubeObject {
    const key = this.#key(type, namespace, name);
    const current = this.#objects.get(key);
    const target = { group: type.group, plural: type.plural, name };
    if (!current) throw errors.notFound(target);
    if ((input.metadata?.name ?? name) !== name) throw errors.badRequest('the name of the object does not match the name on the URL');
    const given = input.metadata?.resourceVersion;
    if (given !== undefined && given !== '' && given !== current.metadata.resourceVersion) throw errors.conflict(target);
    return this.#write(type, key, current, structuredClone(input), subresource);
  }

  patch(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    patchType: PatchType,
    body: unknown,
    subresource?: 'status',
  ): KubeObject {
    const key = this.#key(type, namespace, name);
    const current = this.#objects.get(key);
    const target = { group: type.group, plural: type.plural, name };
    if (!current) throw errors.notFound(target);
    const patched = applyPatch(patchType, this.#present(type, current), body) as KubeObject;
    const given = patched.metadata?.resourceVersion;
    if (given !== undefined && given !== current.metadata.resourceVersion) throw errors.conflict(target);
    if (patched.metadata?.name !== name) throw errors.invalid(type.kind, name, 'metadata.name', 'field is immutable');
    return this.#write(type, key, current, patched, subresource);
  }

  #write(type: ResourceType, key: string, current: KubeObject, next: KubeObject, subresource: 'status' | undefined): KubeObject {
    next.metadata ??= {};
    let merged: KubeObject;
    if (subresource === 'status') merged = { ...structuredClone(current), status: next.status };
    else {
      merged = next;
      // Fields the server owns are kept whatever the client sent.
      for (const field of ['uid', 'creationTimestamp', 'namespace', 'deletionTimestamp', 'generation'] as const) {
        if (current.metadata[field] === undefined) delete merged.metadata[field];
        else (merged.metadata as Record<string, unknown>)[field] = current.metadata[field];
      }
      if (type.statusSubresource) {
        if (current.status === undefined) delete merged.status;
        else merged.status = structuredClone(current.status);
      }
      if (!isDeepStrictEqual(asJson(withoutMetaAndStatus(merged)), asJson(withoutMetaAndStatus(current))))
        merged.metadata.generation = (current.metadata.generation ?? 1) + 1;
      if (current.metadata.deletionTimestamp && (merged.metadata.finalizers?.length ?? 0) > (current.metadata.finalizers?.length ?? 0))
        throw errors.invalid(
          type.kind,
          current.metadata.name ?? '',
          'metadata.finalizers',
          'no new finalizers can be added if the object is being deleted',
        );
    }
    merged.apiVersion = apiVersionOf(type);
    merged.kind = type.kind;
    this.#validate(type, merged);
    if (isDeepStrictEqual(comparable(merged), comparable(current))) return this.#present(type, current); // a no-op write keeps the version, as on a real server
    merged.metadata.resourceVersion = this.#nextVersion();
    this.#objects.set(key, merged);
    this.#record('MODIFIED', type, merged, current);
    if (merged.metadata.deletionTimestamp && (merged.metadata.finalizers?.length ?? 0) === 0) this.#remove(type, key, merged);
    return this.#present(type, merged);
  }

  /**
   * DELETE: with finalizers the object only gets a deletionTimestamp and stays until they are gone; without,
   * it is removed and its dependents are collected (background propagation) or orphaned.
   */
  delete(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    options: { propagationPolicy?: string; resourceVersion?: string } = {},
  ): KubeObject {
    const key = this.#key(type, namespace, name);
    const current = this.#objects.get(key);
    const target = { group: type.group, plural: type.plural, name };
    if (!current) throw errors.notFound(target);
    if (options.resourceVersion && options.resourceVersion !== current.metadata.resourceVersion) throw errors.conflict(target);
    if ((current.metadata.finalizers?.length ?? 0) > 0) {
      if (current.metadata.deletionTimestamp) return this.#present(type, current);
      const marked = structuredClone(current);
      marked.metadata.deletionTimestamp = this.#now()
        .toISOString()
        .replace(/\.\d+Z$/, 'Z');
      marked.metadata.resourceVersion = this.#nextVersion();
      this.#objects.set(key, marked);
      this.#record('MODIFIED', type, marked, current);
      return this.#present(type, marked);
    }
    this.#remove(type, key, current, options.propagationPolicy === 'Orphan');
    return this.#present(type, current);
  }

  #remove(type: ResourceType, key: string, object: KubeObject, orphan = false): void {
    this.#objects.delete(key);
    const gone = structuredClone(object);
    gone.metadata.resourceVersion = this.#nextVersion();
    this.#record('DELETED', type, gone, object);
    this.#collect(type, object, orphan);
  }

  /** Garbage collection: dependents of a removed owner go too (or lose the reference when orphaned). */
  #collect(ownerType: ResourceType, owner: KubeObject, orphan: boolean): void {
    const uid = owner.metadata.uid;
    for (const [key, object] of [...this.#objects]) {
      const type = this.#typeOfKey(key);
      if (!type) continue;
      const inNamespace = ownerType.kind === 'Namespace' && type.namespaced && object.metadata.namespace === owner.metadata.name;
      const owned = object.metadata.ownerReferences?.some((ref) => ref.uid === uid) ?? false;
      if (!inNamespace && !owned) continue;
      if (!this.#objects.has(key)) continue;
      if (orphan && owned && !inNamespace) {
        const refs = object.metadata.ownerReferences?.filter((ref) => ref.uid !== uid) ?? [];
        this.#write(
          type,
          key,
          object,
          { ...structuredClone(object), metadata: { ...structuredClone(object.metadata), ownerReferences: refs } },
          undefined,
        );
      } else this.delete(type, object.metadata.namespace, object.metadata.name ?? '');
    }
  }

  #typeOfKey(key: string): ResourceType | undefined {
    const storage = key.split('|')[0] ?? '';
    return this.registry.all().find((t) => storageKey(t) === storage);
  }
}

/** An object as JSON would carry it, without its version: two of them are equal when a write changes nothing. */
function comparable(object: KubeObject): unknown {
  return asJson({ ...object, metadata: { ...object.metadata, resourceVersion: '' } });
}

function asJson(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

function withoutMetaAndStatus(object: KubeObject): Record<string, unknown> {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = object;
  return rest;
}

let nextClusterIp = 10;

/** The defaults a real server fills in that clients commonly read back. */
function applyDefaults(type: ResourceType, object: KubeObject): void {
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
