import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseYaml } from 'yaml';
import { discovery } from './discovery.ts';
import { errors, KubeApiError, statusBody } from './errors.ts';
import type { Faults, LoggedRequest, RequestInfo } from './faults.ts';
import { PatchError, patchTypeOf } from './patch.ts';
import type { ResourceType } from './registry.ts';
import { SelectorError } from './selectors.ts';
import type { KubeObject, ObjectStore } from './store.ts';
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

function send(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

export interface HandlerContext {
  store: ObjectStore;
  faults: Faults;
  users: Map<string, string>;
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
  const user = token ? ctx.users.get(token) : undefined;
  if (user) info.user = user;
  const entry: LoggedRequest = { ...info, status: 0, at: Date.now() };
  ctx.log.push(entry);
  const answer = (status: number, body: unknown) => {
    entry.status = status;
    send(response, status, body);
  };
  try {
    if (!user) throw errors.unauthorized();
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
        answer(201, ctx.store.create(type, namespace, body));
        return;
      }
      case 'update': {
        const body = parseBody(await readBody(request), false) as KubeObject;
        if (!body || typeof body !== 'object') throw errors.badRequest('the request body must be an object');
        answer(200, ctx.store.update(type, namespace, name, body, status));
        return;
      }
      case 'patch': {
        const contentType = request.headers['content-type'] ?? '';
        const patchType = patchTypeOf(contentType);
        if (!patchType) throw errors.unsupportedMediaType(contentType);
        const body = parseBody(await readBody(request), patchType === 'apply');
        answer(200, ctx.store.patch(type, namespace, name, patchType, body, status));
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
          ctx.store.delete(type, namespace, name, {
            ...(policy ? { propagationPolicy: policy } : {}),
            ...(rv ? { resourceVersion: rv } : {}),
          }),
        );
        return;
      }
      case 'deletecollection': {
        const { items } = ctx.store.list(type, namespace, {
          labelSelector: url.searchParams.get('labelSelector'),
          fieldSelector: url.searchParams.get('fieldSelector'),
        });
        for (const item of items) ctx.store.delete(type, item.metadata.namespace, item.metadata.name ?? '');
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
