import type { ServerResponse } from 'node:http';
import { statusBody } from './errors.ts';
import { apiVersionOf, type ResourceType } from './registry.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';
import type { Change, KubeObject, ObjectStore } from './store.ts';

export interface WatchRequest {
  type: ResourceType;
  namespace: string | undefined;
  query: URLSearchParams;
}

/**
 * One open watch stream: newline-delimited JSON events, as the API server sends them. Without a
 * resourceVersion (or with "0") it starts with an ADDED event per current object; with one it replays the
 * history after it, or sends a 410 Expired ERROR event when that version was compacted away.
 */
export class WatchStream {
  readonly #response: ServerResponse;
  #unsubscribe: () => void;
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #request: WatchRequest;
  readonly #matches: (object: KubeObject | undefined) => boolean;
  readonly #store: ObjectStore;
  #closed = false;
  readonly #onClose: () => void;

  constructor(
    store: ObjectStore,
    request: WatchRequest,
    response: ServerResponse,
    options: { bookmarkIntervalMs: number; onClose: () => void },
  ) {
    this.#store = store;
    this.#request = request;
    this.#response = response;
    this.#onClose = options.onClose;
    const labels = parseLabelSelector(request.query.get('labelSelector'));
    const fields = parseFieldSelector(request.query.get('fieldSelector'));
    this.#matches = (object) => {
      if (!object) return false;
      if (request.type.namespaced && request.namespace !== undefined && object.metadata.namespace !== request.namespace) return false;
      return labels(object.metadata.labels) && fields(object);
    };
    response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    response.flushHeaders();
    response.on('close', () => this.close());

    const since = request.query.get('resourceVersion');
    const pending: Change[] = [];
    // Subscribe before reading the state so that no change falls between the two.
    this.#unsubscribe = store.subscribe((change) => pending.push(change));
    if (since === null || since === '' || since === '0') {
      const { items, resourceVersion } = store.list(request.type, request.namespace, {
        labelSelector: request.query.get('labelSelector'),
        fieldSelector: request.query.get('fieldSelector'),
      });
      for (const item of items) this.#send('ADDED', { ...item, apiVersion: apiVersionOf(request.type), kind: request.type.kind });
      this.#follow(Number(resourceVersion), pending);
    } else {
      const from = Number(since);
      const replay = Number.isFinite(from) ? store.changesSince(from) : undefined;
      if (!replay) {
        this.#sendRaw({
          type: 'ERROR',
          object: statusBody(410, 'Expired', `too old resource version: ${since} (${store.resourceVersion})`),
        });
        this.close();
        return;
      }
      for (const change of replay) this.#deliver(change);
      this.#follow(store.resourceVersion, pending);
    }
    const timeout = Number(request.query.get('timeoutSeconds') ?? '0');
    if (timeout > 0) this.#timers.push(setTimeout(() => this.close(), timeout * 1000));
    if (request.query.get('allowWatchBookmarks') === 'true' && options.bookmarkIntervalMs > 0) {
      const timer = setInterval(() => this.bookmark(), options.bookmarkIntervalMs);
      timer.unref();
      this.#timers.push(timer);
    }
  }

  #follow(after: number, pending: Change[]): void {
    for (const change of pending.splice(0)) if (change.resourceVersion > after) this.#deliver(change);
    this.#unsubscribe();
    this.#unsubscribe = this.#store.subscribe((change) => {
      if (change.resourceVersion > after) this.#deliver(change);
    });
  }

  #deliver(change: Change): void {
    const type = this.#request.type;
    if (change.resource.group !== type.group || change.resource.plural !== type.plural) return;
    const present = (o: KubeObject) => ({ ...structuredClone(o), apiVersion: apiVersionOf(type), kind: type.kind });
    const now = this.#matches(change.object);
    const before = this.#matches(change.old);
    if (change.type === 'ADDED' && now) this.#send('ADDED', present(change.object));
    else if (change.type === 'DELETED' && before) this.#send('DELETED', present(change.object));
    else if (change.type === 'MODIFIED') {
      // A filtered watch sees an object that moves out of (into) its selector as deleted (added).
      if (now && before) this.#send('MODIFIED', present(change.object));
      else if (now) this.#send('ADDED', present(change.object));
      else if (before) this.#send('DELETED', present(change.object));
    }
  }

  #send(type: string, object: KubeObject): void {
    this.#sendRaw({ type, object });
  }

  #sendRaw(event: Record<string, unknown>): void {
    if (this.#closed) return;
    this.#response.write(`${JSON.stringify(event)}\n`);
  }

  bookmark(): void {
    this.#send('BOOKMARK', {
      apiVersion: apiVersionOf(this.#request.type),
      kind: this.#request.type.kind,
      metadata: { resourceVersion: String(this.#store.resourceVersion) },
    });
  }

  /** Ends the stream: cleanly (as at timeoutSeconds) or by destroying the connection (a dropped watch). */
  close(abrupt = false): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#unsubscribe();
    if (abrupt) this.#response.socket?.destroy();
    else this.#response.end();
    this.#onClose();
  }
}
