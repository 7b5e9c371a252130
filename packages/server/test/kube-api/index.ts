import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { generate } from 'selfsigned';
import { Faults, type LoggedRequest } from './faults.ts';
import { ResourceRegistry, type ResourceType } from './registry.ts';
import { type HandlerContext, handle } from './server.ts';
import { type KubeObject, ObjectStore } from './store.ts';
import type { WatchStream } from './watch.ts';

export type { LoggedRequest, RequestInfo, RequestMatcher } from './faults.ts';
export type { ResourceType } from './registry.ts';
export type { Change, KubeObject } from './store.ts';

export interface KubeApiOptions {
  /** HTTPS with a generated self-signed certificate (the default), or plain HTTP. */
  tls?: boolean;
  /** Loopback address to listen on. */
  host?: string;
  /** Watch history kept for resumption; older versions answer 410 Gone. */
  historyLimit?: number;
  /** How often a watch that asked for bookmarks gets one (0: never). */
  bookmarkIntervalMs?: number;
  /** When false, namespaced objects may be created in namespaces that do not exist. */
  requireNamespaces?: boolean;
  now?: () => Date;
}

let cachedCertificate: Promise<{ cert: string; key: string }> | undefined;

function certificate(): Promise<{ cert: string; key: string }> {
  cachedCertificate ??= generate([{ name: 'commonName', value: 'kube-apiserver-test-double' }], {
    keyType: 'ec',
    curve: 'P-256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 7, ip: '127.0.0.1' },
          { type: 2, value: 'localhost' },
        ],
      },
    ],
  }).then((pems) => ({ cert: pems.cert, key: pems.private }));
  return cachedCertificate;
}

/**
 * An in-process Kubernetes API server for tests (see README.md): the real REST and watch protocol over
 * HTTP(S) on loopback, with a kubeconfig per user so that code under test is configured as it would be
 * against a real cluster.
 */
export class KubeApi {
  readonly registry: ResourceRegistry;
  readonly store: ObjectStore;
  readonly faults = new Faults();
  /** Every request served, in order, with the user and the status it got. */
  readonly log: LoggedRequest[] = [];
  readonly #server: Server;
  readonly #watches = new Set<WatchStream>();
  readonly #users = new Map<string, string>();
  readonly #sockets = new Set<Socket>();
  readonly #ca: string | undefined;
  #url = '';

  private constructor(server: Server, registry: ResourceRegistry, store: ObjectStore, ca: string | undefined) {
    this.#server = server;
    this.registry = registry;
    this.store = store;
    this.#ca = ca;
  }

  static async start(options: KubeApiOptions = {}): Promise<KubeApi> {
    const registry = new ResourceRegistry();
    const store = new ObjectStore(registry, {
      ...(options.historyLimit !== undefined ? { historyLimit: options.historyLimit } : {}),
      ...(options.now ? { now: options.now } : {}),
      ...(options.requireNamespaces !== undefined ? { requireNamespaces: options.requireNamespaces } : {}),
    });
    const tls = options.tls ?? true;
    const pems = tls ? await certificate() : undefined;
    let api: KubeApi | undefined;
    const listener = (request: Parameters<typeof handle>[1], response: Parameters<typeof handle>[2]) => {
      if (api) void handle(api.#context(options.bookmarkIntervalMs ?? 10_000), request, response);
    };
    const server = pems ? createHttpsServer({ cert: pems.cert, key: pems.key }, listener) : createHttpServer(listener);
    api = new KubeApi(server, registry, store, pems?.cert);
    const kube = api;
    server.on('connection', (socket: Socket) => {
      kube.#sockets.add(socket);
      socket.on('close', () => kube.#sockets.delete(socket));
    });
    server.on('secureConnection', () => undefined);
    const host = options.host ?? '127.0.0.1';
    await new Promise<void>((ok) => server.listen(0, host, ok));
    const { port } = server.address() as AddressInfo;
    api.#url = `${tls ? 'https' : 'http'}://${host}:${port}`;
    api.addUser('admin');
    return api;
  }

  #context(bookmarkIntervalMs: number): HandlerContext {
    return { store: this.store, faults: this.faults, users: this.#users, log: this.log, watches: this.#watches, bookmarkIntervalMs };
  }

  get url(): string {
    return this.#url;
  }

  /** Adds a user with its own bearer token (requests in the log carry the user's name). */
  addUser(name: string): string {
    for (const [token, user] of this.#users) if (user === name) return token;
    const token = randomBytes(24).toString('base64url');
    this.#users.set(token, name);
    return token;
  }

  /** A KubeConfig for `user` (created on first use), exactly what code would load from a kubeconfig file. */
  kubeConfig(user = 'admin', namespace = 'default'): KubeConfig {
    const token = this.addUser(user);
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: 'test-double',
          server: this.#url,
          skipTLSVerify: false,
          ...(this.#ca ? { caData: Buffer.from(this.#ca).toString('base64') } : {}),
        },
      ],
      users: [{ name: user, token }],
      contexts: [{ name: 'test-double', cluster: 'test-double', user, namespace }],
      currentContext: 'test-double',
    });
    return kc;
  }

  /** Writes a kubeconfig file for `user` (mode 0600), for code that takes a path (KUBECONFIG, --kubeconfig). */
  async writeKubeconfig(path: string, user = 'admin', namespace = 'default'): Promise<string> {
    await writeFile(path, this.kubeConfig(user, namespace).exportConfig(), { mode: 0o600 });
    return path;
  }

  /** Registers a custom resource type (creating a CustomResourceDefinition through the API works too). */
  registerResource(type: ResourceType): ResourceType {
    return this.registry.register(type);
  }

  /** In-process writes and reads, for seeding a suite or a controller double; they go through the same rules. */
  create(object: KubeObject): KubeObject {
    return this.store.create(this.store.typeOf(object), object.metadata.namespace, object);
  }

  get(apiVersion: string, kind: string, name: string, namespace?: string): KubeObject {
    return this.store.get(this.store.typeOf({ apiVersion, kind }), namespace, name);
  }

  tryGet(apiVersion: string, kind: string, name: string, namespace?: string): KubeObject | undefined {
    try {
      return this.get(apiVersion, kind, name, namespace);
    } catch {
      return undefined;
    }
  }

  list(apiVersion: string, kind: string, namespace?: string, labelSelector?: string): KubeObject[] {
    return this.store.list(this.store.typeOf({ apiVersion, kind }), namespace, { labelSelector: labelSelector ?? null }).items;
  }

  update(object: KubeObject, subresource?: 'status'): KubeObject {
    return this.store.update(this.store.typeOf(object), object.metadata.namespace, object.metadata.name ?? '', object, subresource);
  }

  patch(
    apiVersion: string,
    kind: string,
    name: string,
    namespace: string | undefined,
    mergePatch: unknown,
    subresource?: 'status',
  ): KubeObject {
    return this.store.patch(this.store.typeOf({ apiVersion, kind }), namespace, name, 'merge', mergePatch, subresource);
  }

  delete(apiVersion: string, kind: string, name: string, namespace?: string): KubeObject {
    return this.store.delete(this.store.typeOf({ apiVersion, kind }), namespace, name);
  }

  /** Open watch streams right now. */
  get openWatches(): number {
    return this.#watches.size;
  }

  /** Drops every open watch: abruptly (the connection is destroyed) or as a server-side timeout would end it. */
  dropWatches(how: 'abrupt' | 'clean' = 'abrupt'): number {
    const streams = [...this.#watches];
    for (const stream of streams) stream.close(how === 'abrupt');
    return streams.length;
  }

  /** Sends a bookmark on every open watch that asked for them. */
  sendBookmarks(): void {
    for (const stream of this.#watches) stream.bookmark();
  }

  /** Forgets the watch history (etcd compaction): resuming from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.store.compact();
  }

  /** Requests in the log that match. */
  requests(match: (request: LoggedRequest) => boolean = () => true): LoggedRequest[] {
    return this.log.filter(match);
  }

  async close(): Promise<void> {
    for (const stream of [...this.#watches]) stream.close(true);
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((ok) => this.#server.close(() => ok()));
  }
}
