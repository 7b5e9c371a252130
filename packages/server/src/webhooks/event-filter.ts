import { EVENT_TYPES } from '../events/payloads.ts';
import { eventFamily } from './store.ts';

/** Families a filter may name (`customer.*`), derived from the event names. */
export const EVENT_FAMILIES = [...new Set(EVENT_TYPES.map(eventFamily))];

/** Everything a webhook's `events` list may name: `*`, a family, or an event (never `ping`). */
export const NAMEABLE_EVENTS: readonly string[] = ['*', ...EVENT_FAMILIES, ...EVENT_TYPES];

/** The entries of a filter that name nothing we send, with why; empty when the filter is valid. */
export function unknownFilterEntries(filter: readonly string[]): { index: number; message: string }[] {
  const problems: { index: number; message: string }[] = [];
  filter.forEach((entry, index) => {
    if (entry === 'ping') problems.push({ index, message: 'ping cannot be named: it is sent only by POST /webhook/test, and * covers it' });
    else if (!NAMEABLE_EVENTS.includes(entry)) problems.push({ index, message: `${JSON.stringify(entry)} is not an event name or family` });
  });
  return problems;
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
