import { type TSchema, Type } from 'typebox';
import { PaginationSchema } from '../pagination/cursor.ts';

/**
 * Response schemas and values of the success envelope (partner-api.md, Conventions). `description` is what
 * the OpenAPI document says the response is (`@fastify/swagger` reads `x-response-description` and leaves
 * it out of the schema).
 */
const described = (description: string | undefined) => (description === undefined ? {} : { 'x-response-description': description });
export const success = <T extends TSchema>(data: T, description?: string) =>
  Type.Object({ status: Type.Literal('success'), data }, described(description));
export const listOf = <T extends TSchema>(item: T, description?: string) =>
  Type.Object({ status: Type.Literal('success'), data: Type.Array(item), pagination: PaginationSchema }, described(description));
export const ok = <T>(data: T) => ({ status: 'success' as const, data });
