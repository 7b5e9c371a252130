import type { Logger } from 'pino';
import type { SpanHandle, Tracing, TracingSettings } from './types.ts';

export type { SpanHandle } from './types.ts';

/*
 * Traces, process-wide as OpenTelemetry's own provider is: a pass-through (`off`) until a server with
 * OTEL_EXPORTER_OTLP_ENDPOINT set starts them, which loads the SDK (`otel.ts`) then and only then.
 */

const noSpan: SpanHandle = { set: () => {}, fail: () => {} };

const off: Tracing = {
  enabled: false,
  traceparent: () => null,
  linked: (_name, _linkTo, _attributes, work) => work(noSpan),
  child: (_name, _attributes, work) => work(noSpan),
  detached: (work) => work(),
  instrument: () => {},
  shutdown: async () => {},
};

let current: Tracing = off;
/** Servers of this process that started tracing: the last one to stop turns it off. */
let users = 0;
let starting: Promise<void> | undefined;

/** The process's tracing: a pass-through until `startTracing`. */
export function tracing(): Tracing {
  return current;
}

/** Loads the OpenTelemetry SDK and sends spans to the collector at `settings.endpoint`. */
export async function startTracing(settings: TracingSettings, logger: Logger): Promise<void> {
  users++;
  starting ??= import('./otel.ts').then(({ openTelemetryTracing }) => {
    current = openTelemetryTracing(settings, logger);
    logger.info({ endpoint: settings.endpoint, service: settings.serviceName }, 'traces are exported over OTLP');
  });
  await starting;
}

/** Exports the spans still buffered and turns tracing off again, once no server of this process uses it. */
export async function stopTracing(): Promise<void> {
  users = Math.max(0, users - 1);
  if (users > 0) return;
  await starting;
  starting = undefined;
  const stopping = current;
  current = off;
  await stopping.shutdown();
}
