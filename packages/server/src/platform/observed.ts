import type { PlatformCallResult } from '../infra/metrics/metrics.ts';
import { tracing } from '../infra/telemetry/tracing.ts';
import { type PlatformContext, PlatformUnavailableError } from './platform.ts';

/** What is counted of each platform call (the process's metrics). */
export interface PlatformCallMetrics {
  platformCall(platform: string, call: string, result: PlatformCallResult, elapsedMs: number): void;
}

/** Calls that answer undefined when the platform cannot tell now; for the others it is an answer. */
const UNDEFINED_IS_UNAVAILABLE = new Set(['gpuUsage', 'usage']);

/**
 * One platform call, counted and timed by its driver, call and result, and with traces on, in a span
 * under the request's or the operation look's that made it.
 */
export function observedCall<T>(
  driver: string,
  call: string,
  ctx: PlatformContext,
  metrics: PlatformCallMetrics | undefined,
  run: () => Promise<T>,
): Promise<T> {
  const traces = tracing();
  if (!metrics && !traces.enabled) return run();
  const startedAt = performance.now();
  const counted = async (): Promise<T> => {
    try {
      const value = await run();
      metrics?.platformCall(driver, call, resultOf(call, value), performance.now() - startedAt);
      return value;
    } catch (error) {
      metrics?.platformCall(
        driver,
        call,
        error instanceof PlatformUnavailableError ? 'unavailable' : 'error',
        performance.now() - startedAt,
      );
      throw error;
    }
  };
  if (!traces.enabled) return counted();
  const attributes = { 'tenantry.platform': driver, 'tenantry.platform.call': call, 'tenantry.operation.id': ctx.operation?.id };
  return traces.child(`platform ${call}`, attributes, async (span) => {
    const value = await counted();
    const result = resultOf(call, value);
    span.set({ 'tenantry.platform.result': result });
    if (result !== 'ok') span.fail(result);
    return value;
  });
}

/** An answer's result: a refusal or failure is `failed`, "look again later" is `unavailable`. */
function resultOf(call: string, value: unknown): PlatformCallResult {
  if (value === undefined) return UNDEFINED_IS_UNAVAILABLE.has(call) ? 'unavailable' : 'ok';
  const state = (value as { state?: unknown } | null)?.state;
  if (state === 'failed' || state === 'refused') return 'failed';
  return state === 'unavailable' ? 'unavailable' : 'ok';
}
