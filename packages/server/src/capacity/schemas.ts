import { type Static, type TSchema, Type } from 'typebox';
import { PageQuery } from '../infra/pagination/cursor.ts';
import { Keyed } from '../infra/request-schemas.ts';
import { DNS_LABEL, PlanId } from '../platform/names.ts';

/** A GPU profile name: lowercase, digits and dashes (`a100-40gb`). */
export const GpuProfileName = Type.String({
  pattern: '^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$',
  description: 'A GPU profile, such as `a100-40gb`.',
});

const Amount = (description: string) => Type.Integer({ minimum: 0, maximum: 1_000_000_000, description });
const Gpus = Keyed(GpuProfileName, Amount('GPUs of the profile'), { description: 'GPUs per profile.' });

/** vCPU, memory, storage and GPUs per profile: a quota, a plan's quota, a pool or a maximum. */
export const Resources = Type.Object(
  {
    vcpu: Amount('vCPUs'),
    memory_gib: Amount('memory, GiB'),
    storage_gib: Amount('storage, GiB'),
    gpus: Gpus,
  },
  { title: 'Resources', additionalProperties: false },
);

/** A project cap: any of the dimensions; what it omits is bounded only by the customer's quota. */
export const ProjectCap = Type.Object(
  {
    vcpu: Type.Optional(Amount('vCPUs')),
    memory_gib: Type.Optional(Amount('memory, GiB')),
    storage_gib: Type.Optional(Amount('storage, GiB')),
    gpus: Type.Optional(Gpus),
  },
  { title: 'ProjectCap', additionalProperties: false },
);
export const ProjectCaps = Keyed(Type.String({ pattern: DNS_LABEL, description: 'A project name.' }), ProjectCap, {
  description: 'Caps by project name.',
});

/** CONTRACT §4, Quota. */
export const Quota = Type.Object(
  {
    customer_id: Type.String(),
    revision: Type.Integer({ minimum: 1 }),
    quota: Resources,
    project_caps: ProjectCaps,
  },
  { title: 'Quota' },
);
export type Quota = Static<typeof Quota>;

export const PutQuotaRequest = Type.Object(
  {
    revision: Type.Integer({ minimum: 1, description: 'The revision read last; a change made since answers 409 CONFLICT.' }),
    quota: Resources,
    project_caps: Type.Optional(ProjectCaps),
  },
  { title: 'PutQuotaRequest', additionalProperties: false },
);
export type PutQuotaRequest = Static<typeof PutQuotaRequest>;

/** CONTRACT §4, Plan. */
export const Plan = Type.Object({ id: Type.String(), display_name: Type.String(), quota: Resources }, { title: 'Plan' });
export type Plan = Static<typeof Plan>;

export const CustomerPlan = Type.Object({ customer_id: Type.String(), plan_id: Type.String(), plan: Plan }, { title: 'CustomerPlan' });
export const PutPlanRequest = Type.Object({ plan_id: PlanId }, { title: 'PutPlanRequest', additionalProperties: false });

const PoolDimension = Type.Object({ total: Type.Integer(), allocated: Type.Integer(), available: Type.Integer() });

export const GpuProfile = Type.Object(
  { name: Type.String(), display_name: Type.String(), memory_gib: Type.Integer() },
  { title: 'GpuProfile' },
);

/** CONTRACT §4, Capacity. */
export const Capacity = Type.Object(
  {
    pool: Type.Object({
      vcpu: PoolDimension,
      memory_gib: PoolDimension,
      storage_gib: PoolDimension,
      gpus: Type.Record(Type.String(), PoolDimension),
    }),
    per_customer_max: Resources,
    gpu_profiles: Type.Array(GpuProfile),
  },
  { title: 'Capacity' },
);
export type Capacity = Static<typeof Capacity>;

export const CatalogQuery = Type.Object(PageQuery, { additionalProperties: false });

// Operator side (CONTRACT §3).

export const SetPlanRequest = Type.Object(
  { display_name: Type.String({ minLength: 1, maxLength: 200 }), quota: Resources },
  { additionalProperties: false },
);
export type SetPlanRequest = Static<typeof SetPlanRequest>;

export const SetPartnerPlansRequest = Type.Object(
  { plans: Type.Array(PlanId, { maxItems: 200, description: 'The plans the partner may assign (replaces the list).' }) },
  { additionalProperties: false },
);

export const SetGpuProfilesRequest = Type.Object(
  { profiles: Type.Array(GpuProfileName, { maxItems: 100, description: 'The GPU profiles the partner may grant (replaces the list).' }) },
  { additionalProperties: false },
);

const PartialResources = (description: string): TSchema =>
  Type.Object(
    {
      vcpu: Type.Optional(Amount('vCPUs')),
      memory_gib: Type.Optional(Amount('memory, GiB')),
      storage_gib: Type.Optional(Amount('storage, GiB')),
      gpus: Type.Optional(Gpus),
    },
    { additionalProperties: false, description },
  );

/** `tenantry capacity set`: only what is given changes; a GPU profile set to 0 leaves the pool. */
export const SetCapacityRequest = Type.Object(
  {
    pool: Type.Optional(PartialResources("The partner's pool")),
    per_customer_max: Type.Optional(PartialResources('The most one customer may hold')),
  },
  { additionalProperties: false },
);
export type SetCapacityRequest = {
  pool?: Partial<Static<typeof Resources>>;
  per_customer_max?: Partial<Static<typeof Resources>>;
};

/** The operator's view of a partner's capacity settings. */
export const PartnerCapacity = Type.Object({
  partner_id: Type.String(),
  pool: Resources,
  per_customer_max: Resources,
  allocated: Type.Object({ live: Resources, test: Resources }),
  plans: Type.Array(Type.String()),
  gpu_profiles: Type.Array(Type.String()),
});
export type PartnerCapacity = Static<typeof PartnerCapacity>;
