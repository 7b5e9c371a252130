import { type Static, Type } from 'typebox';
import { Text } from '../infra/request-schemas.ts';

export const TokenRequestJson = Type.Object(
  { api_key: Text({ minLength: 1, maxLength: 512, description: 'The API key issued by the operator.' }) },
  { additionalProperties: false },
);

export const TokenRequestForm = Type.Object(
  {
    grant_type: Type.Literal('client_credentials'),
    client_secret: Text({ minLength: 1, maxLength: 512, description: 'The API key.' }),
    client_id: Type.Optional(Text({ maxLength: 512 })),
  },
  { additionalProperties: false },
);

export const TokenResponse = Type.Object(
  {
    access_token: Type.String(),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ minimum: 1, maximum: 900 }),
    scope: Type.String({ description: 'Space-separated scopes on the token.' }),
  },
  { title: 'TokenResponse' },
);
export type TokenResponse = Static<typeof TokenResponse>;

export const Whoami = Type.Object(
  {
    partner: Type.Object({ id: Type.String(), display_name: Type.String() }),
    scopes: Type.Array(Type.String()),
    limits: Type.Object({
      max_customers: Type.Integer({ description: '0 means unlimited.' }),
      max_usage_window_days: Type.Integer(),
      max_projects_per_customer: Type.Integer(),
      max_open_operations: Type.Integer(),
      rate_limit_per_minute: Type.Integer(),
      rate_limit_burst: Type.Integer(),
    }),
    customer_count: Type.Integer(),
    defaults: Type.Object({
      plan_id: Type.String(),
      grace_days: Type.Integer(),
      project: Type.String({ description: "A new customer's first project when its create names none." }),
    }),
    token: Type.Object({
      expires_at: Type.String({ format: 'date-time' }),
      kid: Type.String(),
      mode: Type.Union([Type.Literal('live'), Type.Literal('test')]),
    }),
  },
  { title: 'Whoami' },
);
export type Whoami = Static<typeof Whoami>;
