import { type TSchema, Type } from 'typebox';
import { PaginationSchema } from '../pagination/cursor.ts';

/** Response schemas and values of the success envelope (partner-api.md, Conventions). */
export const success = <T extends TSchema>(data: T) => Type.Object({ status: Type.Literal('success'), data });
export const listOf = <T extends TSchema>(item: T) =>
  Type.Object({ status: Type.Literal('success'), data: Type.Array(item), pagination: PaginationSchema });
export const ok = <T>(data: T) => ({ status: 'success' as const, data });
