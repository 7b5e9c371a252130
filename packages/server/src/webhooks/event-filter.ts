import { EVENT_TYPES } from '../events/payloads.ts';
import type { ErrorDetails, FieldProblem } from '../infra/errors/catalogue.ts';
import { eventFamily } from './store.ts';

/** Families a filter may name (`customer.*`), derived from the event names. */
export const EVENT_FAMILIES = [...new Set(EVENT_TYPES.map(eventFamily))];

/** Everything a webhook's `events` list may name: `*`, a family, or an event (never `ping`). */
export const NAMEABLE_EVENTS: readonly string[] = ['*', ...EVENT_FAMILIES, ...EVENT_TYPES];

/**
 * `PUT /webhook`'s validation problems with each unknown filter entry said in words (the schema lists
 * the names it allows), and `details.known_events` when there is one.
 */
export function explainFilterEntries(
  problems: FieldProblem[],
  request: { body: unknown },
): { problems: FieldProblem[]; details?: ErrorDetails } {
  const filter = (request.body as { events?: unknown } | null | undefined)?.events;
  let unknown = false;
  const explained = problems.map((problem) => {
    const index = /^events\.(\d+)$/.exec(problem.field)?.[1];
    const entry = index === undefined || !Array.isArray(filter) ? undefined : filter[Number(index)];
    if (problem.in !== 'body' || typeof entry !== 'string') return problem;
    unknown = true;
    const message =
      entry === 'ping'
        ? 'ping cannot be named: it is sent only by POST /webhook/test, and * covers it'
        : `${JSON.stringify(entry)} is not an event name or family`;
    return { ...problem, message };
  });
  return unknown ? { problems: explained, details: { known_events: NAMEABLE_EVENTS } } : { problems: explained };
}

/** partner-api.md, Webhook configuration: `*` or an empty list means every event. */
export function filterMatches(filter: readonly string[], event: string): boolean {
  if (filter.length === 0) return true;
  for (const entry of filter) {
    if (entry === '*' || entry === event) return true;
    if (entry.endsWith('.*') && event.startsWith(entry.slice(0, -1))) return true;
  }
  return false;
}
