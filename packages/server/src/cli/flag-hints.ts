import { CliError, type FlagHint } from './operator-client.ts';

/** A value refused on the command line: one line naming the flag, with a value that works; exit 2. */
export function flagError(hint: FlagHint, problem: string, got?: string): CliError {
  const example = hint.flag.startsWith('<') ? hint.example : `${hint.flag} ${hint.example}`;
  return new CliError(`${hint.flag} ${problem}, for example ${example}${got === undefined ? '' : `; got "${got}"`}`, 2);
}

/** A date and time with its zone, as the API takes it; `2026-12-31` alone is not one. */
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/;

/** An example expiry: midnight UTC 90 days from now, so that the example itself is never in the past. */
export function exampleExpiry(nowMs = Date.now()): string {
  return `${new Date(nowMs + 90 * 86_400_000).toISOString().slice(0, 10)}T00:00:00Z`;
}

/** `--expires-at`, checked before it is sent: an ISO 8601 date and time with a zone. */
export function expiresAt(value: string, nowMs = Date.now()): string {
  const hint = { flag: '--expires-at', example: exampleExpiry(nowMs) };
  if (!ISO_DATE_TIME.test(value) || Number.isNaN(Date.parse(value))) {
    throw flagError(hint, 'must be an ISO 8601 date and time with its zone', value);
  }
  if (Date.parse(value) <= nowMs) throw flagError(hint, 'must be in the future', value);
  return value;
}

/** A whole number for a count flag, checked before it is sent. */
export function wholeNumber(hint: FlagHint, value: string): number {
  if (!/^\d+$/.test(value)) throw flagError(hint, 'must be a whole number', value);
  return Number(value);
}
