import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, LogController } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { ApiError, validationError } from '../errors/catalogue.ts';
import { newId } from '../ids.ts';
import { tracing } from '../telemetry/tracing.ts';
import { coalesceResponseWrites } from './coalesced-writes.ts';
import { DeferredSchemas } from './deferred-schemas.ts';
import { BODY_LIMIT_BYTES, installErrorHandler, sendError } from './error-handler.ts';
import { serializationSchema } from './serialization-schema.ts';
import { installValidators } from './validation.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The partner a request acts for, once authenticated; logged with each request. */
    logPartnerId?: string;
  }
}

const ROUTABLE_METHODS: HTTPMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** What is counted of each answered request (infra/metrics: the route is its pattern, undefined when none matched). */
export interface RequestMetrics {
  request(api: string, method: string, route: string | undefined, status: number, elapsedMs: number): void;
}

/**
 * The Fastify instance both APIs start from: minted request ids on every
 * response, one JSON log line per request, the catalogue's error envelope for
 * everything (including unknown routes, wrong methods and a server that is
 * shutting down), and strict validators.
 */
export function createHttpApp(
  logger: FastifyBaseLogger,
  name: string,
  options: { trustProxy?: false | number | string[]; metrics?: RequestMetrics } = {},
) {
  let closing = false;
  // Each open connection, with the response it wrote last (idle once that has finished). Node's
  // closeIdleConnections() leaves a connection that was opened but never sent a request (HTTP clients
  // open them ahead of need), so such a socket would hold a shutdown open until the headers timeout
  // (60 s): those are closed here, in-flight ones drain, told to close their connection.
  const inFlight: InFlight = new Map();
  // Validators and serialisers compiled when first needed, and by the server's warm-up.
  const schemas = new DeferredSchemas();
  const app = Fastify({
    schemaController: { compilersFactory: { buildSerializer: deferredSerializers(schemas) } },
    // Node answers an HTTP/1.1 request without Host with a bare 400; the onRequest hook answers it in the envelope.
    http: { requireHostHeader: false },
    loggerInstance: logger,
    // One line per request, written by the onResponse hook below.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    // No child logger per request (it costs more than the line itself): every
    // line we write names its request id explicitly.
    childLoggerFactory: (logger) => logger,
    genReqId: () => newId('request'),
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT_BYTES,
    return503OnClosing: false,
    // Clients on keep-alive must not hold a shutdown open.
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 500 },
    // Errors before routing (a malformed URL, a bad content type header): the same envelope, with the id header.
    frameworkErrors: (error, request, reply) => {
      reply.header('x-request-id', request.id);
      sendError(request, reply, validationError([{ in: 'path', field: '', message: `is not a valid URL or request (${error.message})` }]));
    },
    // What Node's HTTP parser refuses before Fastify sees a request gets the envelope too.
    clientErrorHandler: (error, socket) => answerClientError(logger, name, error, socket),
    // A hop count becomes "trust the first N hops"; addresses and CIDRs are passed through.
    trustProxy: typeof options.trustProxy === 'number' ? trustHops(options.trustProxy) : (options.trustProxy ?? false),
  }).withTypeProvider<TypeBoxTypeProvider>();

  installValidators(app, schemas);
  installErrorHandler(app);
  coalesceResponseWrites(app);
  // A span per request, only with traces on (before any route: it wraps their handlers).
  tracing().instrument(app, name);
  const metrics = options.metrics;

  // A second router, fed with every route, answers "which methods does this path have?".
  const methodsByPath = FindMyWay();
  const routes: RegisteredRoute[] = [];
  app.addHook('onRoute', (route) => {
    // A route that declares no query parameters accepts none: an unknown one is a 400, not ignored.
    if (route.schema?.querystring === undefined) {
      route.schema = { ...route.schema, querystring: { type: 'object', properties: {}, additionalProperties: false } };
    }
    routes.push({ method: route.method, url: route.url, schema: route.schema });
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (method === 'HEAD' || method === 'OPTIONS') continue;
      methodsByPath.on(method as HTTPMethod, route.url, () => {});
    }
  });

  app.addHook('onClose', async () => {
    closing = true;
  });
  app.server.on('connection', (socket: Socket) => {
    inFlight.set(socket, undefined);
    socket.once('close', () => inFlight.delete(socket));
  });
  app.addHook('preClose', async () => {
    closing = true;
    // A response still to be written closes its connection, so a keep-alive client cannot hold the
    // shutdown open until its idle timeout; requests that arrive from now on are refused (onRequest).
    for (const response of inFlight.values()) if (response && !response.headersSent) response.setHeader('connection', 'close');
    setImmediate(() => {
      for (const [socket, response] of inFlight) if (response === undefined || response.writableFinished) socket.destroy();
    });
  });

  // The hooks every request passes are callback-style: no promise per hook on the hot path.
  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket;
    // Only a connection still open is recorded (one closed already is gone from the map for good).
    if (inFlight.has(socket)) inFlight.set(socket, reply.raw);
    reply.header('x-request-id', request.id);
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      reply.header('connection', 'close');
      return sendError(request, reply, validationError([{ in: 'header', field: 'host', message: 'is required in HTTP/1.1' }]));
    }
    if (!closing) return done();
    reply.header('connection', 'close');
    sendError(request, reply, new ApiError('UNAVAILABLE', 'The server is shutting down. Retry on another instance.', { retryAfter: 1 }));
  });

  // One line per request, written by pino as every other line (its asynchronous destination: see log/logger.ts).
  app.addHook('onResponse', (request, reply, done) => {
    const elapsedMs = reply.elapsedTime;
    const route = request.routeOptions.url;
    logger.info(
      {
        api: name,
        request_id: request.id,
        partner: request.logPartnerId,
        method: request.method,
        route: route ?? null,
        status: reply.statusCode,
        latency_ms: Math.round(elapsedMs * 100) / 100,
      },
      'request',
    );
    metrics?.request(name, request.method, route, reply.statusCode, elapsedMs);
    done();
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = ROUTABLE_METHODS.filter((m) => methodsByPath.find(m, path) !== null);
    if (allowed.length > 0) {
      return sendError(
        request,
        reply,
        new ApiError('METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${path}.`, {
          details: { method: request.method, allowed },
          headers: { allow: allowed.join(', ') },
        }),
      );
    }
    return sendError(request, reply, new ApiError('NOT_FOUND', `No route matches ${request.method} ${path}.`));
  });

  return Object.assign(app, { schemas, routes: routes as readonly RegisteredRoute[] });
}

/** A route as registered, with its schemas: for checks that must cover every route, a new one too. */
export interface RegisteredRoute {
  method: string | string[];
  url: string;
  schema: { params?: unknown; querystring?: unknown; body?: unknown };
}

/**
 * Fastify's own serialiser compiler (fast-json-stringify), each route's serialiser compiled when first
 * needed, from the response schema with its unions of scalars written as lists of types.
 */
function deferredSerializers(schemas: DeferredSchemas) {
  const selector = SerializerSelector();
  return (...args: Parameters<typeof selector>) => {
    const compile = selector(...args);
    return (route: Parameters<typeof compile>[0]) => {
      const what = `${route.method} ${route.url} response ${route.httpStatus}`;
      const compiled = schemas.defer(what, () => compile({ ...route, schema: serializationSchema(route.schema) }));
      return (data: unknown) => compiled()(data);
    };
  };
}

/**
 * Open connections and the response each wrote last: undefined before the first request, and idle once
 * that response has finished (`writableFinished`). Read so, no listener per response is needed to
 * clear an entry.
 */
type InFlight = Map<Socket, ServerResponse | undefined>;

/**
 * A request Node's parser refused (headers too large, both Content-Length and Transfer-Encoding,
 * malformed framing): answered in the error envelope with a request id, then the connection is
 * closed, since the stream can no longer be trusted. A timeout or a reset has nobody to answer.
 */
function answerClientError(logger: FastifyBaseLogger, api: string, error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || error.code === 'ERR_HTTP_REQUEST_TIMEOUT' || !socket.writable) {
    socket.destroy();
    return;
  }
  const requestId = newId('request');
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const apiError = tooLarge
    ? new ApiError('HEADERS_TOO_LARGE', 'The request headers are larger than the server accepts (16 KiB).')
    : validationError([{ in: 'header', field: '', message: clientErrorMessage(error) }]);
  const body = JSON.stringify({
    status: 'error',
    error: {
      code: apiError.code,
      message: apiError.message,
      request_id: requestId,
      ...(apiError.details ? { details: apiError.details } : {}),
    },
  });
  const reason = tooLarge ? 'Request Header Fields Too Large' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${apiError.status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `x-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
  );
  logger.info({ api, request_id: requestId, status: apiError.status, parser_error: error.code }, 'request refused by the HTTP parser');
}

function clientErrorMessage(error: NodeJS.ErrnoException & { reason?: string }): string {
  // llhttp names the pair in either order, under the code of whichever header came second.
  if (/can't be present with/.test(error.reason ?? '')) return 'the request has both Content-Length and Transfer-Encoding; send one';
  switch (error.code) {
    case 'HPE_INVALID_CONTENT_LENGTH':
      return 'Content-Length is invalid or sent twice with different values';
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return 'Transfer-Encoding is invalid';
    case 'HPE_INVALID_HEADER_TOKEN':
      return 'a header name or value holds a character HTTP does not allow';
    default:
      return `the request is not valid HTTP/1.1 (${error.code ?? 'parse error'})`;
  }
}

function trustHops(hops: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < hops;
}
