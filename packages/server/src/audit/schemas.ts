import { type Static, Type } from 'typebox';
import { PageQuery } from '../infra/pagination/cursor.ts';

export const AuditEntry = Type.Object({
  id: Type.String(),
  at: Type.String({ format: 'date-time' }),
  actor: Type.String(),
  action: Type.String(),
  partner_id: Type.Union([Type.String(), Type.Null()]),
  target: Type.String(),
  before: Type.Unknown(),
  after: Type.Unknown(),
  request_id: Type.String(),
});
export type AuditEntry = Static<typeof AuditEntry>;

export const AuditQuery = Type.Object(
  { partner: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })), ...PageQuery },
  { additionalProperties: false },
);
export type AuditQuery = Static<typeof AuditQuery>;
