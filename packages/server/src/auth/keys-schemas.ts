import { type Static, Type } from 'typebox';

const Mode = Type.Union([Type.Literal('live'), Type.Literal('test')]);

export const IssueKeyRequest = Type.Object(
  {
    mode: Type.Optional(Mode),
    expires_at: Type.Optional(Type.String({ format: 'date-time', description: 'ISO-8601; must be in the future.' })),
    allow_cidrs: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: 100,
        description: 'Source addresses allowed to exchange the key.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type IssueKeyRequest = Static<typeof IssueKeyRequest>;

export const ApiKey = Type.Object({
  kid: Type.String(),
  partner_id: Type.String(),
  mode: Mode,
  status: Type.Union([Type.Literal('active'), Type.Literal('revoked'), Type.Literal('expired')]),
  allow_cidrs: Type.Array(Type.String()),
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});
export type ApiKey = Static<typeof ApiKey>;

export const IssuedKey = Type.Object({
  key: Type.String({ description: 'The full key. Shown once; only its hash is stored.' }),
  kid: Type.String(),
  partner_id: Type.String(),
  mode: Mode,
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  allow_cidrs: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
});
export type IssuedKey = Static<typeof IssuedKey>;
