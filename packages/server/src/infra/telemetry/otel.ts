import { type Context, DiagLogLevel, diag, type Link, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import type { Logger } from 'pino';
import type { SpanAttributes, SpanHandle, Tracing, TracingSettings } from './types.ts';

/**
 * Tracing on the OpenTelemetry SDK, loaded only when OTEL_EXPORTER_OTLP_ENDPOINT is set. Spans go in
 * batches to `<endpoint>/v1/traces` (OTLP over HTTP, JSON); the exporter reads the standard
 * OTEL_EXPORTER_OTLP_* variables for headers, certificates and timeouts. Nothing is registered
 * globally: the context manager and the tracer are this module's, so libraries instrumented with
 * the OpenTelemetry API make no spans of their own, and a partner's `traceparent` header starts
 * nothing (the partner API is public: a trace begins at the request).
 */
export function openTelemetryTracing(settings: TracingSettings, logger: Logger): Tracing {
  // The SDK reports through the API's diagnostic logger: an export the collector refused or never got
  // becomes a warning line (one per failed batch) instead of nothing.
  const warn = (message: string, ...args: unknown[]) => logger.warn({ detail: args.map(String) }, `traces: ${message}`);
  const quiet = () => {};
  diag.setLogger({ error: warn, warn, info: quiet, debug: quiet, verbose: quiet }, DiagLogLevel.WARN);
  const exporter = new OTLPTraceExporter({ url: `${settings.endpoint.replace(/\/+$/, '')}/v1/traces` });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter })],
  });
  const tracer = provider.getTracer('tenantry');
  const contexts = new AsyncLocalStorageContextManager().enable();
  const currentSpan = () => trace.getSpan(contexts.active());

  /** Runs `work` with `span` current, ending it when the work settles (a throw marks it failed). */
  const within = async <T>(span: Span, work: (handle: SpanHandle) => Promise<T>): Promise<T> => {
    try {
      return await contexts.with(trace.setSpan(ROOT_CONTEXT, span), () => work(handleOf(span)));
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  };

  return {
    enabled: true,
    traceparent: () => {
      const context = currentSpan()?.spanContext();
      return context ? `00-${context.traceId}-${context.spanId}-${context.traceFlags.toString(16).padStart(2, '0')}` : null;
    },
    linked: (name, linkTo, attributes, work) => {
      const link = linkOf(linkTo);
      const span = tracer.startSpan(name, { root: true, attributes: defined(attributes), links: link ? [link] : [] }, ROOT_CONTEXT);
      return within(span, work);
    },
    child: (name, attributes, work) => {
      const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes: defined(attributes) }, contexts.active());
      return within(span, work);
    },
    detached: (work) => contexts.with(ROOT_CONTEXT, work),
    instrument: (app, api) =>
      instrumentRequests(app, api, (name, attributes) => tracer.startSpan(name, attributes, ROOT_CONTEXT), contexts),
    shutdown: async () => {
      // A collector that does not answer must not hold a shutdown (and its drain) for the exporter's retries.
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), SHUTDOWN_WAIT_MS);
      });
      const flushed = provider.shutdown().catch((err: unknown) => logger.warn({ err }, 'traces: exporting the last spans failed'));
      if ((await Promise.race([flushed, waited])) === 'late')
        logger.warn(`traces: the last spans were not exported within ${SHUTDOWN_WAIT_MS} ms`);
      clearTimeout(timer);
      contexts.disable();
      diag.disable();
    },
  };
}

/** How long a stopping server waits for its last spans to reach the collector. */
const SHUTDOWN_WAIT_MS = 2_000;

type StartSpan = (name: string, options: { kind: SpanKind; attributes: Record<string, string> }) => Span;

/**
 * One server span per request, named by its route pattern: started when the request arrives, current
 * while its handler runs (what the handler causes, platform calls and stored operations and
 * deliveries, hangs from it), ended with its answer's status.
 */
function instrumentRequests(app: FastifyInstance, api: string, start: StartSpan, contexts: AsyncLocalStorageContextManager): void {
  const spans = new WeakMap<FastifyRequest, Span>();
  const end = (request: FastifyRequest, status: number | undefined) => {
    const span = spans.get(request);
    if (!span) return;
    spans.delete(request);
    if (status !== undefined) span.setAttribute('http.response.status_code', status);
    if (request.logPartnerId) span.setAttribute('tenantry.partner_id', request.logPartnerId);
    if (status === undefined || status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  };
  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url;
    const attributes: Record<string, string> = {
      'http.request.method': request.method,
      'tenantry.request_id': request.id,
      'tenantry.api': api,
    };
    if (route) attributes['http.route'] = route;
    spans.set(request, start(route ? `${request.method} ${route}` : request.method, { kind: SpanKind.SERVER, attributes }));
    done();
  });
  app.addHook('onRoute', (route: RouteOptions) => {
    const handler = route.handler;
    route.handler = function traced(this: FastifyInstance, request, reply) {
      const span = spans.get(request);
      if (!span) return handler.call(this, request, reply);
      const context: Context = trace.setSpan(ROOT_CONTEXT, span);
      return contexts.with(context, handler, this, request, reply);
    };
  });
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    end(request, undefined);
    done();
  });
}

function handleOf(span: Span): SpanHandle {
  return {
    set: (attributes) => span.setAttributes(defined(attributes)),
    fail: (message) => span.setStatus({ code: SpanStatusCode.ERROR, message }),
  };
}

function defined(attributes: SpanAttributes): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) out[key] = value;
  return out;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A link to the span a stored `traceparent` names; none when absent or malformed. */
function linkOf(traceparent: string | null): Link | undefined {
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (!match) return undefined;
  const [, traceId = '', spanId = '', flags = '00'] = match;
  return { context: { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true } };
}
