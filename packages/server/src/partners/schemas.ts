import { type Static, Type } from 'typebox';
import { DNS_LABEL } from '../platform/names.ts';
import { SCOPES } from './scopes.ts';

const PARTNER_ID_PATTERN = '^[a-z][a-z0-9-]{1,30}[a-z0-9]$';

export const PartnerId = Type.String({
  pattern: PARTNER_ID_PATTERN,
  description: 'Partner id: lowercase letters, digits and dashes, 3 to 32 characters.',
});

const ScopeList = Type.Array(
  Type.Union([Type.Literal('customers:read'), Type.Literal('customers:write'), Type.Literal('customers:sso'), Type.Literal('usage:read')]),
  { uniqueItems: true, maxItems: SCOPES.length, description: 'Scopes granted on new tokens.' },
);

export const PartnerLimits = Type.Object(
  {
    max_customers: Type.Integer({ minimum: 0, maximum: 1_000_000, description: '0 means unlimited.' }),
    max_projects_per_customer: Type.Integer({ minimum: 1, maximum: 10_000 }),
    max_open_operations: Type.Integer({ minimum: 1, maximum: 10_000 }),
    max_usage_window_days: Type.Integer({ minimum: 1, maximum: 366 }),
    rate_limit_per_minute: Type.Integer({ minimum: 1, maximum: 10_000_000 }),
    rate_limit_burst: Type.Integer({ minimum: 1, maximum: 10_000_000 }),
  },
  { additionalProperties: false },
);

export const PartnerDefaults = Type.Object(
  {
    plan_id: Type.String({ minLength: 1, maxLength: 63 }),
    grace_days: Type.Integer({ minimum: 0, maximum: 365 }),
    project: Type.String({
      pattern: DNS_LABEL,
      description: "A new customer's first project when its create names none (Kube-DC's Partner `defaults.projectName`).",
    }),
  },
  { additionalProperties: false },
);

/** Kube-DC's Partner `portalUrl`: https, a host, no credentials. */
const PortalUrl = Type.Union([Type.String({ maxLength: 2048, pattern: '^https://[^/?#@\\s]+([/?#]\\S*)?$' }), Type.Null()], {
  description: "The partner's own portal: the console shows customers a link to it (Kube-DC's Partner `portalUrl`). null: none.",
});
const ContactEmail = Type.Union([Type.String({ format: 'email', minLength: 5, maxLength: 256 }), Type.Null()], {
  description: "Who to write to about the partner (Kube-DC's Partner `contactEmail`). null: none.",
});

/** Kube-DC's Partner `customerIdPrefix` is at most 16 characters; by default the partner's name cut to 16. */
export const CUSTOMER_PREFIX_MAX = 16;

/** Kube-DC's Partner `customerIdPrefix`: a DNS label, as long as its resource allows. */
export const CustomerPrefix = Type.String({
  maxLength: CUSTOMER_PREFIX_MAX,
  pattern: '^[a-z0-9]([a-z0-9-]*[a-z0-9])?$',
  description:
    "The partner's customers are named `<prefix>-<customer id>` on the platform. At most 16 characters, as Kube-DC's Partner `customerIdPrefix`; no other partner's prefix may equal it, begin with it and a dash, or be the start of it before a dash (`a` and `a-b` would both name `a-b-c`).",
});

export const Partner = Type.Object({
  id: Type.String(),
  display_name: Type.String(),
  customer_prefix: Type.String(),
  portal_url: Type.Union([Type.String(), Type.Null()]),
  contact_email: Type.Union([Type.String(), Type.Null()]),
  status: Type.Union([Type.Literal('provisioning'), Type.Literal('active'), Type.Literal('suspended')]),
  scopes: Type.Array(Type.String()),
  limits: PartnerLimits,
  defaults: PartnerDefaults,
  allow_private_webhooks: Type.Boolean(),
  customer_count: Type.Integer(),
  managed_by: Type.Union([Type.String(), Type.Null()], {
    description:
      'The Kubernetes Partner resource (namespace/name) that manages this partner; its managed fields are changed there, not here.',
  }),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  suspended_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});
export type Partner = Static<typeof Partner>;

const DisplayName = Type.String({ minLength: 1, maxLength: 200 });

export const CreatePartnerRequest = Type.Object(
  {
    id: PartnerId,
    display_name: DisplayName,
    scopes: Type.Optional(ScopeList),
    limits: Type.Optional(Type.Partial(PartnerLimits, { additionalProperties: false })),
    defaults: Type.Optional(Type.Partial(PartnerDefaults, { additionalProperties: false })),
    allow_private_webhooks: Type.Optional(Type.Boolean()),
    customer_prefix: Type.Optional(CustomerPrefix),
    portal_url: Type.Optional(PortalUrl),
    contact_email: Type.Optional(ContactEmail),
  },
  { additionalProperties: false },
);
export type CreatePartnerRequest = Static<typeof CreatePartnerRequest>;

export const UpdatePartnerRequest = Type.Object(
  {
    display_name: Type.Optional(DisplayName),
    scopes: Type.Optional(ScopeList),
    limits: Type.Optional(Type.Partial(PartnerLimits, { additionalProperties: false })),
    defaults: Type.Optional(Type.Partial(PartnerDefaults, { additionalProperties: false })),
    allow_private_webhooks: Type.Optional(Type.Boolean()),
    customer_prefix: Type.Optional(CustomerPrefix),
    portal_url: Type.Optional(PortalUrl),
    contact_email: Type.Optional(ContactEmail),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdatePartnerRequest = Static<typeof UpdatePartnerRequest>;

/** What a new partner gets when the operator does not say otherwise. */
export const PARTNER_DEFAULTS = {
  limits: {
    max_customers: 100,
    max_projects_per_customer: 10,
    max_open_operations: 20,
    max_usage_window_days: 93,
    rate_limit_per_minute: 120,
    rate_limit_burst: 40,
  },
  defaults: { plan_id: 'standard', grace_days: 14, project: 'default' },
} as const;
