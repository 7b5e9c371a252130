import { type Static, type TSchema, type TString, type TStringOptions, Type } from 'typebox';

/**
 * Request schemas that say in the OpenAPI document what the validator enforces. No NUL character:
 * PostgreSQL's text cannot hold it, so the validator refuses it in every string of a request
 * (`unstorableText` in `http/validation.ts`); free-text fields carry it as their pattern, while fields with a
 * stricter pattern, a format or a list of values exclude NUL already.
 */
export const TEXT_PATTERN = '^[^\\u0000]*$';

/** A free-text request field (a display name, a reason, a filter value): any text but NUL. */
export const Text = (options: Omit<TStringOptions, 'pattern'> = {}) => Type.String({ ...options, pattern: TEXT_PATTERN });

/**
 * An object keyed by names of one form (GPU profiles, project names), each holding a `value`. Written with
 * `propertyNames` rather than TypeBox's `Record` (`patternProperties`): that lets a key of another form
 * through unchecked, and `@fastify/swagger` drops its pattern from the document.
 */
export const Keyed = <V extends TSchema>(key: TString, value: V, options: { description?: string } = {}) =>
  Type.Unsafe<Record<string, Static<V>>>({ type: 'object', propertyNames: key, additionalProperties: value, ...options });
