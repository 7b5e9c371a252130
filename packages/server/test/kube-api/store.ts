import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { errors } from './errors.ts';
import { applyDefaults, comparable, mergeUpdate } from './object-defaults.ts';
import { applyPatch, type PatchType } from './patch.ts';
import { apiVersionOf, type ResourceRegistry, type ResourceType } from './registry.ts';
import { listPage } from './store-list.ts';
import type { AdmissionHook, AdmissionRequest, Change, ChangeType, KubeObject, ListOptions, WriteContext } from './store-types.ts';
import { admissionRequest, GARBAGE_COLLECTOR, NAMESPACE_CONTROLLER } from './store-types.ts';
import {
  checkApplyConfiguration,
  checkPatchType,
  checkTarget,
  decode,
  reportUnknownFields,
  validateCreate,
  validateUpdate,
} from './validation.ts';

// The types live in store-types.ts; they are imported from here.
export type {
  AdmissionHook,
  AdmissionRequest,
  Change,
  ChangeType,
  KubeObject,
  ListOptions,
  ObjectMeta,
  RequestUser,
  WriteContext,
} from './store-types.ts';
export { DEFAULT_USER } from './store-types.ts';

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
  /** Validating admission (policies, webhooks): each runs on every write after validation, before it is stored. */
  readonly admission: AdmissionHook[] = [];

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

  /** Now, as metav1.Time serializes: RFC 3339 in whole seconds. */
  #timestamp(): string {
    return this.#now()
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
  }

  #nextVersion(): string {
    this.#version += 1;
    return String(this.#version);
  }

  exists(type: ResourceType, namespace: string | undefined, name: string): boolean {
    return this.#objects.has(this.#key(type, namespace, name));
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
    return { ...listPage(this.#objects, `${storageKey(type)}|`, type, namespace, options), resourceVersion: String(this.#version) };
  }

  #keyOf(type: ResourceType, object: KubeObject): string {
    return this.#key(type, object.metadata.namespace, object.metadata.name ?? '');
  }

  #admit(request: Omit<AdmissionRequest, 'user' | 'dryRun'>, context: WriteContext | undefined): void {
    for (const hook of this.admission) hook(admissionRequest(request, context));
  }

  /**
   * POST: decoded (unknown fields, defaults), checked for its namespace, named, validated, admitted, then
   * stored unless it exists or the request is a dry run.
   */
  create(type: ResourceType, namespace: string | undefined, input: KubeObject, context?: WriteContext): KubeObject {
    const object = structuredClone(input) as KubeObject;
    object.metadata ??= {};
    object.apiVersion = apiVersionOf(type);
    object.kind = type.kind;
    reportUnknownFields(type, decode(type, object), context);
    if (type.namespaced) {
      const ns = namespace ?? object.metadata.namespace;
      if (!ns) throw errors.badRequest('the namespace of the object must be given');
      if (object.metadata.namespace && object.metadata.namespace !== ns)
        throw errors.badRequest('the namespace of the provided object does not match the namespace sent on the request');
      object.metadata.namespace = ns;
      const namespaceObject = this.#objects.get(this.#key(this.#type('v1', 'Namespace'), undefined, ns));
      if (this.requireNamespaces && !namespaceObject) throw errors.notFound({ group: '', plural: 'namespaces', name: ns });
      if (namespaceObject?.metadata.deletionTimestamp) throw errors.namespaceTerminating(ns);
    } else delete object.metadata.namespace;
    if (!object.metadata.name && object.metadata.generateName)
      object.metadata.name = `${object.metadata.generateName}${randomUUID().replaceAll('-', '').slice(0, 5)}`;
    // A custom resource's status is the /status subresource's to write; suites seeding in-process may set it.
    if (context && type.schema && type.statusSubresource) delete object.status;
    Object.assign(object.metadata, { uid: randomUUID(), creationTimestamp: this.#timestamp(), generation: 1 });
    delete object.metadata.deletionTimestamp;
    delete object.metadata.resourceVersion;
    applyDefaults(type, object);
    validateCreate(type, object, context);
    const name = object.metadata.name ?? '';
    this.#admit({ operation: 'CREATE', type, namespace: object.metadata.namespace, name, object: this.#present(type, object) }, context);
    const key = this.#keyOf(type, object);
    if (this.#objects.has(key)) throw errors.alreadyExists({ group: type.group, plural: type.plural, name });
    if (context?.dryRun) return this.#present(type, object);
    object.metadata.resourceVersion = this.#nextVersion();
    this.#objects.set(key, object);
    if (type.kind === 'CustomResourceDefinition') this.registry.registerDefinition(object);
    this.#record('ADDED', type, object, undefined);
    return this.#present(type, object);
  }

  /** PUT semantics: replaces the object (or only its status), guarded by resourceVersion. */
  update(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    input: KubeObject,
    subresource?: 'status',
    context?: WriteContext,
  ): KubeObject {
    const key = this.#key(type, namespace, name);
    const current = this.#objects.get(key);
    if (!current) throw errors.notFound({ group: type.group, plural: type.plural, name });
    const next = structuredClone(input);
    next.metadata ??= {};
    next.metadata.name ??= name;
    reportUnknownFields(type, decode(type, next), context);
    checkTarget(type, namespace, name, next, current);
    return this.#write(type, key, current, next, subresource, context);
  }

  /** PATCH: the patch applied to the stored object, then checked as an update. Server-side apply creates what is missing. */
  patch(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    patchType: PatchType,
    body: unknown,
    subresource?: 'status',
    context?: WriteContext,
  ): KubeObject {
    const key = this.#key(type, namespace, name);
    const current = this.#objects.get(key);
    if (patchType === 'apply') checkApplyConfiguration(type, body);
    if (!current && patchType === 'apply' && subresource === undefined)
      return this.create(type, namespace, { ...(body as KubeObject), metadata: { ...(body as KubeObject).metadata, name } }, context);
    if (!current) throw errors.notFound({ group: type.group, plural: type.plural, name });
    checkPatchType(type, patchType);
    const patched = applyPatch(patchType, this.#present(type, current), body) as KubeObject;
    patched.metadata ??= {};
    reportUnknownFields(type, decode(type, patched), context, patched);
    patched.metadata.resourceVersion ??= current.metadata.resourceVersion;
    checkTarget(type, namespace, name, patched, current);
    return this.#write(type, key, current, patched, subresource, context);
  }

  #write(
    type: ResourceType,
    key: string,
    current: KubeObject,
    next: KubeObject,
    subresource: 'status' | undefined,
    context: WriteContext | undefined,
  ): KubeObject {
    const merged = mergeUpdate(type, current, next, subresource);
    merged.apiVersion = apiVersionOf(type);
    merged.kind = type.kind;
    validateUpdate(type, merged, current, subresource, context);
    this.#admit(
      {
        operation: 'UPDATE',
        type,
        ...(subresource ? { subresource } : {}),
        namespace: current.metadata.namespace,
        name: current.metadata.name ?? '',
        object: this.#present(type, merged),
        oldObject: this.#present(type, current),
      },
      context,
    );
    if (isDeepStrictEqual(comparable(merged), comparable(current))) return this.#present(type, current); // a no-op write keeps the version, as on a real server
    if (context?.dryRun)
      return this.#present(type, { ...merged, metadata: { ...merged.metadata, resourceVersion: current.metadata.resourceVersion } });
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
    context?: WriteContext,
  ): KubeObject {
    const key = this.#key(type, namespace, name);
    const current = this.#objects.get(key);
    const target = { group: type.group, plural: type.plural, name };
    if (!current) throw errors.notFound(target);
    if (options.resourceVersion && options.resourceVersion !== current.metadata.resourceVersion) throw errors.conflict(target);
    this.#admit(
      { operation: 'DELETE', type, namespace: current.metadata.namespace, name, oldObject: this.#present(type, current) },
      context,
    );
    if (context?.dryRun) return this.#dryRunDelete(type, current);
    if (type.group === '' && type.kind === 'Namespace') return this.#deleteNamespace(type, key, current);
    if ((current.metadata.finalizers?.length ?? 0) > 0) {
      if (current.metadata.deletionTimestamp) return this.#present(type, current);
      const marked = structuredClone(current);
      marked.metadata.deletionTimestamp = this.#timestamp();
      marked.metadata.resourceVersion = this.#nextVersion();
      this.#objects.set(key, marked);
      this.#record('MODIFIED', type, marked, current);
      return this.#present(type, marked);
    }
    this.#remove(type, key, current, options.propagationPolicy === 'Orphan');
    return this.#present(type, current);
  }

  /** What a delete would answer, without doing it: the object marked for deletion when finalizers hold it. */
  #dryRunDelete(type: ResourceType, current: KubeObject): KubeObject {
    const marked = this.#present(type, current);
    if ((current.metadata.finalizers?.length ?? 0) > 0) marked.metadata.deletionTimestamp ??= this.#timestamp();
    return marked;
  }

  #remove(type: ResourceType, key: string, object: KubeObject, orphan = false): void {
    this.#objects.delete(key);
    const gone = structuredClone(object);
    gone.metadata.resourceVersion = this.#nextVersion();
    this.#record('DELETED', type, gone, object);
    this.#collect(type, object, orphan);
    if (type.namespaced && object.metadata.namespace) this.#finishNamespace(object.metadata.namespace);
  }

  /**
   * A namespace is deleted in two phases, as on a cluster: it turns Terminating (no new objects may be
   * created in it), its objects are deleted, and it goes away only once the last of them is gone, so an
   * object whose finalizers a controller still holds keeps its namespace alive.
   */
  #deleteNamespace(type: ResourceType, key: string, current: KubeObject): KubeObject {
    if (!current.metadata.deletionTimestamp) {
      const marked = structuredClone(current);
      marked.metadata.deletionTimestamp = this.#timestamp();
      marked.status = { ...((marked.status as object) ?? {}), phase: 'Terminating' };
      marked.metadata.resourceVersion = this.#nextVersion();
      this.#objects.set(key, marked);
      this.#record('MODIFIED', type, marked, current);
      this.#collect(type, marked, false);
    }
    const after = this.#objects.get(key);
    if (after) this.#finishNamespace(after.metadata.name ?? '');
    return this.#present(type, this.#objects.get(key) ?? current);
  }

  #finishNamespace(name: string): void {
    const type = this.#type('v1', 'Namespace');
    const key = this.#key(type, undefined, name);
    const namespace = this.#objects.get(key);
    if (!namespace?.metadata.deletionTimestamp || (namespace.metadata.finalizers?.length ?? 0) > 0) return;
    for (const [objectKey, object] of this.#objects) {
      if (object.metadata.namespace === name && this.#typeOfKey(objectKey)?.namespaced) return;
    }
    this.#objects.delete(key);
    const gone = structuredClone(namespace);
    gone.metadata.resourceVersion = this.#nextVersion();
    this.#record('DELETED', type, gone, namespace);
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
          { user: inNamespace ? NAMESPACE_CONTROLLER : GARBAGE_COLLECTOR },
        );
      } else
        this.delete(
          type,
          object.metadata.namespace,
          object.metadata.name ?? '',
          {},
          { user: inNamespace ? NAMESPACE_CONTROLLER : GARBAGE_COLLECTOR },
        );
    }
  }

  #typeOfKey(key: string): ResourceType | undefined {
    const storage = key.split('|')[0] ?? '';
    return this.registry.all().find((t) => storageKey(t) === storage);
  }
}
