import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { generate } from 'selfsigned';
import { installAdmissionPolicies } from './admission.ts';
import { identityOf, MASTERS, Rbac, type RequestUser, serviceAccountUser } from './authorization.ts';
import { DeploymentController, JobController, type PodRunner } from './controllers.ts';
import { Faults, type LoggedRequest } from './faults.ts';
import { ResourceRegistry, type ResourceType } from './registry.ts';
import { type HandlerContext, handle } from './server.ts';
import { type KubeObject, ObjectStore } from './store.ts';
import type { WatchStream } from './watch.ts';
import { Webhooks } from './webhooks.ts';

export type { PodOutcome, PodRunner } from './controllers.ts';
export type { LoggedRequest, RequestInfo, RequestMatcher } from './faults.ts';
export type { ResourceType } from './registry.ts';
export type { AdmissionRequest, Change, KubeObject, RequestUser } from './store.ts';
export type { Webhook, WebhookAnswer } from './webhooks.ts';

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
  /** Bearer token to the identity it authenticates. */
  readonly #users = new Map<string, RequestUser>();
  /** RBAC over the stored Roles and bindings; enforced only after `enforceRbac()`. */
  readonly rbac: Rbac;
  /** Validating webhooks, called on every write they match after the stored ValidatingAdmissionPolicies. */
  readonly webhooks: Webhooks;
  readonly #sockets = new Set<Socket>();
  readonly #ca: string | undefined;
  readonly #controllers: Array<{ stop(): void }> = [];
  #url = '';

  private constructor(server: Server, registry: ResourceRegistry, store: ObjectStore, ca: string | undefined) {
    this.#server = server;
    this.registry = registry;
    this.store = store;
    this.#ca = ca;
    this.rbac = new Rbac(store);
    // kube-apiserver's order: ValidatingAdmissionPolicy, then ValidatingAdmissionWebhook.
    installAdmissionPolicies(store);
    this.webhooks = new Webhooks(store);
    store.admission.push(this.webhooks.hook);
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
    api.addUser('admin', { groups: [MASTERS] });
    return api;
  }

  #context(bookmarkIntervalMs: number): HandlerContext {
    return {
      store: this.store,
      faults: this.faults,
      users: this.#users,
      rbac: this.rbac,
      log: this.log,
      watches: this.#watches,
      bookmarkIntervalMs,
    };
  }

  get url(): string {
    return this.#url;
  }

  /**
   * Adds a user with its own bearer token and returns the token (the same one when the user exists; given
   * groups replace its groups). Every user is also in system:authenticated, as the authenticator adds it; a
   * name `system:serviceaccount:<ns>:<name>` given no groups authenticates as that service account, with its
   * groups. Requests in the log carry the user's name.
   */
  addUser(name: string, options: { groups?: string[] } = {}): string {
    for (const [token, user] of this.#users)
      if (user.username === name) {
        if (options.groups) this.#users.set(token, identityOf(name, options.groups));
        return token;
      }
    const token = randomBytes(24).toString('base64url');
    this.#users.set(token, identityOf(name, options.groups));
    return token;
  }

  /** Adds a service account's token; its username (`system:serviceaccount:<ns>:<name>`) names it to `kubeConfig`. */
  addServiceAccount(namespace: string, name: string): string {
    const { username } = serviceAccountUser(namespace, name);
    this.addUser(username);
    return username;
  }

  /** The identity a user's token authenticates as, if the user was added. */
  identity(name: string): RequestUser | undefined {
    for (const user of this.#users.values()) if (user.username === name) return { ...user, groups: [...user.groups] };
    return undefined;
  }

  /**
   * Turns RBAC on (or off): every request is then authorized by the stored Roles, ClusterRoles and bindings,
   * as kube-apiserver's RBAC authorizer does; system:masters (the default `admin`) is always allowed.
   */
  enforceRbac(on = true): void {
    this.rbac.enabled = on;
  }

  /** A KubeConfig for `user` (created on first use), exactly what code would load from a kubeconfig file. */
  kubeConfig(user = 'admin', namespace = 'default'): KubeConfig {
    return this.kubeConfigContexts([{ name: 'test-double', user, namespace }]);
  }

  /**
   * A KubeConfig with several contexts, each a user of the double (created on first use) and a namespace;
   * the first is current unless `current` names another. `as` makes a context impersonate a user, as a
   * kubeconfig's `as:` does (client-node sends it as Impersonate-User).
   */
  kubeConfigContexts(contexts: Array<{ name: string; user: string; namespace?: string; as?: string }>, current?: string): KubeConfig {
    const kc = new KubeConfig();
    const users = new Map<string, { name: string; token: string; impersonateUser?: string }>();
    for (const c of contexts) {
      const entry = `${c.user}${c.as ? ` as ${c.as}` : ''}`;
      users.set(entry, { name: entry, token: this.addUser(c.user), ...(c.as ? { impersonateUser: c.as } : {}) });
    }
    kc.loadFromOptions({
      clusters: [
        {
          name: 'test-double',
          server: this.#url,
          skipTLSVerify: false,
          ...(this.#ca ? { caData: Buffer.from(this.#ca).toString('base64') } : {}),
        },
      ],
      users: [...users.values()],
      contexts: contexts.map((c) => ({
        name: c.name,
        cluster: 'test-double',
        user: `${c.user}${c.as ? ` as ${c.as}` : ''}`,
        namespace: c.namespace ?? 'default',
      })),
      currentContext: current ?? contexts[0]?.name ?? '',
    });
    return kc;
  }

  /** Writes `kubeConfigContexts(...)` as a file (mode 0600). */
  async writeKubeconfigContexts(
    path: string,
    contexts: Array<{ name: string; user: string; namespace?: string; as?: string }>,
    current?: string,
  ): Promise<string> {
    await writeFile(path, this.kubeConfigContexts(contexts, current).exportConfig(), { mode: 0o600 });
    return path;
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

  /**
   * Starts the Job controller double: every new Job gets a pod, and `runner` decides how its container ends
   * (exit code and termination message) or that it keeps waiting (README "Controllers").
   */
  runJobs(runner: PodRunner): JobController {
    const controller = new JobController(this.store, runner);
    this.#controllers.push(controller);
    return controller;
  }

  /** Starts the Deployment controller double: a spec change rolls the replicas over, one every `stepMs`. */
  runDeployments(options: { stepMs?: number } = {}): DeploymentController {
    const controller = new DeploymentController(this.store, options);
    this.#controllers.push(controller);
    return controller;
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
    for (const controller of this.#controllers) controller.stop();
    for (const stream of [...this.#watches]) stream.close(true);
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((ok) => this.#server.close(() => ok()));
  }
}
