import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseYaml } from 'yaml';
import { attributesOf, impersonate, type Rbac } from './authorization.ts';
import { discovery, openApi } from './discovery.ts';
import { errors, KubeApiError, statusBody } from './errors.ts';
import type { Faults, LoggedRequest, RequestInfo } from './faults.ts';
import { PatchError, patchTypeOf } from './patch.ts';
import type { ResourceType } from './registry.ts';
import { SelectorError } from './selectors.ts';
import type { KubeObject, ObjectStore, RequestUser, WriteContext } from './store.ts';
import { WatchStream } from './watch.ts';

const MAX_BODY = 3 * 1024 * 1024;

interface Route {
  info: RequestInfo;
  type?: ResourceType;
  /** Set for discovery paths. */
  discovery?: string[];
}

/** Turns a URL path into the resource it names, the way the API server's request-info resolver does. */
function resolve(store: ObjectStore, method: string, url: URL): Route {
  const segments = url.pathname.split('/').filter((s) => s !== '');
  const info: RequestInfo = { method, path: url.pathname, query: url.searchParams, verb: 'other' };
  const [root] = segments;
  let rest: string[];
  if (root === 'api' && segments.length >= 2) {
    info.group = '';
    info.version = segments[1];
    rest = segments.slice(2);
  } else if (root === 'apis' && segments.length >= 3) {
    info.group = segments[1];
    info.version = segments[2];
    rest = segments.slice(3);
  } else return { info: { ...info, verb: 'discovery' }, discovery: segments };
  if (rest.length === 0) return { info: { ...info, verb: 'discovery' }, discovery: segments };
  const group = info.group ?? '';
  const version = info.version ?? '';
  let plural: string | undefined;
  // namespaces/<ns>/<plural>/... is namespaced unless <plural> is not a resource (namespaces/<name>/status).
  if (rest[0] === 'namespaces' && rest.length >= 3 && rest[2] !== undefined && store.registry.find(group, version, rest[2])?.namespaced) {
    info.namespace = rest[1];
    plural = rest[2];
    info.name = rest[3];
    info.subresource = rest[4];
  } else {
    plural = rest[0];
    info.name = rest[1];
    info.subresource = rest[2];
  }
  info.resource = plural;
  const type = plural ? store.registry.find(group, version, plural) : undefined;
  const collection = info.name === undefined;
  if (method === 'GET') info.verb = collection ? (url.searchParams.get('watch') === 'true' ? 'watch' : 'list') : 'get';
  else if (method === 'POST') info.verb = 'create';
  else if (method === 'PUT') info.verb = 'update';
  else if (method === 'PATCH') info.verb = 'patch';
  else if (method === 'DELETE') info.verb = collection ? 'deletecollection' : 'delete';
  return type ? { info, type } : { info };
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new KubeApiError(413, 'RequestEntityTooLarge', 'Request entity too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseBody(text: string, yaml: boolean): unknown {
  try {
    return yaml ? parseYaml(text) : JSON.parse(text);
  } catch {
    throw errors.badRequest('the request body could not be decoded');
  }
}

function send(response: ServerResponse, status: number, body: unknown, warnings: string[] = []): void {
  const text = JSON.stringify(body);
  const headers: Record<string, string | number | string[]> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  };
  // One header per warning, as `299 - "text"` (RFC 7234 warn-code; k8s.io/apiserver/pkg/warning).
  if (warnings.length > 0) headers.warning = warnings.map((w) => `299 - ${JSON.stringify(w)}`);
  response.writeHead(status, headers);
  response.end(text);
}

/**
 * The write options a request carries in its query (`dryRun=All`, `fieldValidation`), as
 * metav1.CreateOptions/UpdateOptions/PatchOptions/DeleteOptions decode them; anything else is refused as the
 * real server refuses it.
 */
function writeContext(query: URLSearchParams, user: RequestUser): WriteContext {
  const dryRun = query.getAll('dryRun');
  for (const value of dryRun) if (value !== 'All') throw errors.badRequest(`Invalid dry run value: ${value}: supported values: "All"`); // apimachinery validation.ValidateDryRun
  const validation = query.get('fieldValidation') ?? '';
  if (!['', 'Strict', 'Warn', 'Ignore'].includes(validation))
    throw errors.badRequest(`fieldValidation must be one of "Ignore", "Warn", "Strict" or empty, got "${validation}"`);
  // Warn unless told otherwise, server-side apply included (handlers/rest.go fieldValidation).
  const fieldValidation = (validation || 'Warn') as WriteContext['fieldValidation'];
  return { user, dryRun: dryRun.length > 0, ...(fieldValidation ? { fieldValidation } : {}), warnings: [] };
}

export interface HandlerContext {
  store: ObjectStore;
  faults: Faults;
  /** Bearer token to the identity it authenticates. */
  users: Map<string, RequestUser>;
  rbac: Rbac;
  log: LoggedRequest[];
  watches: Set<WatchStream>;
  bookmarkIntervalMs: number;
}

/** Serves one request: authentication, faults, then the REST verb. */
export async function handle(ctx: HandlerContext, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://double');
  const route = resolve(ctx.store, request.method ?? 'GET', url);
  const info = route.info;
  const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
  const authenticated = token ? ctx.users.get(token) : undefined;
  if (authenticated) info.user = authenticated.username;
  const entry: LoggedRequest = { ...info, status: 0, at: Date.now() };
  ctx.log.push(entry);
  // Who the request runs as: the token's identity, or the one it impersonates once that is authorized.
  let requestUser: RequestUser = authenticated ?? { username: 'system:anonymous', groups: ['system:unauthenticated'] };
  const warnings: string[] = [];
  const answer = (status: number, body: unknown) => {
    entry.status = status;
    send(response, status, body, warnings);
  };
  /** The context of a write, whose warnings end up in this response's headers. */
  const write = (): WriteContext => {
    const context = writeContext(url.searchParams, requestUser);
    context.warnings = warnings;
    return context;
  };
  try {
    if (!authenticated) throw errors.unauthorized();
    requestUser = impersonate(ctx.rbac, authenticated, request.headers, request.headersDistinct);
    ctx.rbac.check(attributesOf(requestUser, info, route.type));
    const delay = ctx.faults.takeDelay(info);
    if (delay > 0) await sleep(delay);
    const failure = ctx.faults.takeFailure(info);
    if (failure) {
      await readBody(request);
      answer(failure.status, statusBody(failure.status, failure.reason, failure.message));
      return;
    }
    if (route.discovery) {
      if (['healthz', 'readyz', 'livez'].includes(route.discovery[0] ?? '')) {
        entry.status = 200;
        response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        return;
      }
      if (route.discovery[0] === 'openapi') {
        answer(...openApi(ctx.store.registry, route.discovery, request.headers.accept));
        return;
      }
      const doc = discovery(ctx.store.registry, route.discovery);
      if (!doc) throw new KubeApiError(404, 'NotFound', 'the server could not find the requested resource');
      answer(200, doc);
      return;
    }
    const type = route.type;
    if (!type) throw new KubeApiError(404, 'NotFound', 'the server could not find the requested resource');
    if (type.namespaced === false && info.namespace !== undefined)
      throw new KubeApiError(404, 'NotFound', 'the server could not find the requested resource');
    const namespace = type.namespaced ? info.namespace : undefined;
    const name = info.name ?? '';
    const sub = info.subresource;
    if (sub !== undefined && !(sub === 'status' && type.statusSubresource))
      throw new KubeApiError(404, 'NotFound', 'the server could not find the requested resource');
    const status = sub === 'status' ? 'status' : undefined;
    switch (info.verb) {
      case 'watch': {
        entry.status = 200;
        // A stream may end inside its constructor (410 Gone): it is tracked only while open.
        let stream: WatchStream | undefined;
        let closed = false;
        stream = new WatchStream(ctx.store, { type, namespace, query: url.searchParams }, response, {
          bookmarkIntervalMs: ctx.bookmarkIntervalMs,
          onClose: () => {
            closed = true;
            if (stream) ctx.watches.delete(stream);
          },
        });
        if (!closed) ctx.watches.add(stream);
        return;
      }
      case 'list': {
        const limit = Number(url.searchParams.get('limit') ?? '0');
        const list = ctx.store.list(type, namespace, {
          labelSelector: url.searchParams.get('labelSelector'),
          fieldSelector: url.searchParams.get('fieldSelector'),
          limit: Number.isFinite(limit) && limit > 0 ? limit : 0,
          continue: url.searchParams.get('continue'),
        });
        // Items of a typed list carry no apiVersion/kind, as on a real server.
        const items = list.items.map(({ apiVersion: _a, kind: _k, ...rest }) => rest);
        answer(200, {
          apiVersion: type.group === '' ? type.version : `${type.group}/${type.version}`,
          kind: `${type.kind}List`,
          metadata: { resourceVersion: list.resourceVersion, ...(list.continue ? { continue: list.continue } : {}) },
          items,
        });
        return;
      }
      case 'get':
        answer(200, ctx.store.get(type, namespace, name));
        return;
      case 'create': {
        const body = parseBody(await readBody(request), false) as KubeObject;
        if (!body || typeof body !== 'object') throw errors.badRequest('the request body must be an object');
        answer(201, ctx.store.create(type, namespace, body, write()));
        return;
      }
      case 'update': {
        const body = parseBody(await readBody(request), false) as KubeObject;
        if (!body || typeof body !== 'object') throw errors.badRequest('the request body must be an object');
        answer(200, ctx.store.update(type, namespace, name, body, status, write()));
        return;
      }
      case 'patch': {
        const contentType = request.headers['content-type'] ?? '';
        const patchType = patchTypeOf(contentType);
        if (!patchType) throw errors.unsupportedMediaType(contentType);
        const body = parseBody(await readBody(request), patchType === 'apply');
        // Server-side apply creates a missing object, and says so with 201 as on a cluster.
        const created = patchType === 'apply' && status === undefined && !ctx.store.exists(type, namespace, name);
        answer(created ? 201 : 200, ctx.store.patch(type, namespace, name, patchType, body, status, write()));
        return;
      }
      case 'delete': {
        const text = await readBody(request);
        const options = (text.trim() === '' ? {} : parseBody(text, false)) as {
          propagationPolicy?: string;
          preconditions?: { resourceVersion?: string };
        };
        const policy = url.searchParams.get('propagationPolicy') ?? options.propagationPolicy;
        const rv = options.preconditions?.resourceVersion;
        answer(
          200,
          ctx.store.delete(
            type,
            namespace,
            name,
            {
              ...(policy ? { propagationPolicy: policy } : {}),
              ...(rv ? { resourceVersion: rv } : {}),
            },
            write(),
          ),
        );
        return;
      }
      case 'deletecollection': {
        const { items } = ctx.store.list(type, namespace, {
          labelSelector: url.searchParams.get('labelSelector'),
          fieldSelector: url.searchParams.get('fieldSelector'),
        });
        const context = write();
        for (const item of items) ctx.store.delete(type, item.metadata.namespace, item.metadata.name ?? '', {}, context);
        answer(200, statusBody(200, '', `deleted ${items.length}`));
        return;
      }
      default:
        throw errors.methodNotAllowed(`the server does not allow this method on the requested resource`);
    }
  } catch (error) {
    if (response.headersSent) {
      response.destroy(error as Error);
      return;
    }
    if (error instanceof KubeApiError) answer(error.code, error.toStatus());
    else if (error instanceof SelectorError || error instanceof PatchError) answer(400, statusBody(400, 'BadRequest', error.message));
    else answer(500, statusBody(500, 'InternalError', `the test double failed: ${(error as Error).message}`));
  }
}
