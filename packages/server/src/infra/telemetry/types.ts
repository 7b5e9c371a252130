import type { FastifyInstance } from 'fastify';

/** Attributes of a span; undefined values are left out. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** What work running in a span may add to it. */
export interface SpanHandle {
  set(attributes: SpanAttributes): void;
  /** Marks the span failed (an error the work met, or one it answers with). */
  fail(message: string): void;
}

/**
 * Traces, process-wide as OpenTelemetry's own provider is. Off unless OTEL_EXPORTER_OTLP_ENDPOINT is
 * set: then `startTracing` loads the OpenTelemetry SDK (`otel.ts`, imported only then) and every call
 * here makes spans. Off, every call is a pass-through, and the SDK is never loaded.
 */
export interface Tracing {
  readonly enabled: boolean;
  /**
   * The current span as a W3C `traceparent`, stored with a row whose work runs later, maybe in another
   * process (an operation, a webhook delivery), so that work's spans link back to it; null with no span.
   */
  traceparent(): string | null;
  /**
   * Runs `work` in the root span of a new trace, linked to the span `linkTo` names (a stored
   * `traceparent`): background work one request or step caused, which may run long after it ended.
   */
  linked<T>(name: string, linkTo: string | null, attributes: SpanAttributes, work: (span: SpanHandle) => Promise<T>): Promise<T>;
  /** Runs `work` in a child span of the current one (a platform call within a request or a step). */
  child<T>(name: string, attributes: SpanAttributes, work: (span: SpanHandle) => Promise<T>): Promise<T>;
  /**
   * Runs `work` outside any span: a background loop's pass, so that what it does is never taken for
   * part of the request whose commit happened to wake it.
   */
  detached<T>(work: () => T): T;
  /** One span per request of `app` (called before any route is added). */
  instrument(app: FastifyInstance, api: string): void;
  /** Exports what is still buffered and stops. */
  shutdown(): Promise<void>;
}

export interface TracingSettings {
  /** OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); spans go to `<endpoint>/v1/traces` as JSON. */
  endpoint: string;
  /** `service.name` of the spans (OTEL_SERVICE_NAME). */
  serviceName: string;
}
