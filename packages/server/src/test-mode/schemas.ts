import { type Static, Type } from 'typebox';
import { Keyed, Text } from '../infra/request-schemas.ts';
import { CustomerId, ProjectName } from '../platform/names.ts';
import { TEST_CLOCK_MAX_OFFSET_SECONDS } from './mode-clock.ts';

/** Failure codes a test can inject (partner-api.md, Operation failure codes; CUSTOMER_DELETING/DELETED come by themselves). */
export const INJECTABLE_CODE = '^(PROVISIONING_FAILED|PROVISIONING_TIMEOUT|NO_ADDRESS_SPACE|UPSTREAM_[1-5][0-9]{2})$';

const FailureCount = Type.Integer({ minimum: 1, maximum: 1000, description: 'How many matching steps fail; default 1.' });

const ProvisioningFailure = Type.Object(
  {
    type: Type.Enum(['customer.create', 'project.create']),
    code: Type.String({
      pattern: INJECTABLE_CODE,
      description: 'PROVISIONING_FAILED, PROVISIONING_TIMEOUT, NO_ADDRESS_SPACE or UPSTREAM_<status>.',
    }),
    message: Type.Optional(Text({ minLength: 1, maxLength: 500 })),
    customer_id: Type.Optional(CustomerId),
    project: Type.Optional(ProjectName),
    count: Type.Optional(FailureCount),
  },
  { title: 'ProvisioningFailureRequest', additionalProperties: false },
);

const GpuUsageFailure = Type.Object(
  { type: Type.Literal('gpu_usage'), count: Type.Optional(FailureCount) },
  { title: 'GpuUsageFailureRequest', additionalProperties: false },
);

/** One of two forms, told apart by `type`: a provisioning step's failure needs a code, a GPU usage check's takes none. */
export const FailureRequest = Type.Unsafe<Static<typeof ProvisioningFailure> | Static<typeof GpuUsageFailure>>({
  // The discriminator checks objects only, and stands for `oneOf`: the type refuses everything else.
  type: 'object',
  oneOf: [ProvisioningFailure, GpuUsageFailure],
  discriminator: { propertyName: 'type' },
});
export type FailureRequest = Static<typeof FailureRequest>;

export const FailureResult = Type.Object({
  type: Type.String(),
  code: Type.Union([Type.String(), Type.Null()]),
  message: Type.Union([Type.String(), Type.Null()]),
  customer_id: Type.Union([Type.String(), Type.Null()]),
  project: Type.Union([Type.String(), Type.Null()]),
  count: Type.Integer(),
});

const WorkloadName = Type.String({ pattern: '^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$' });

export const WorkloadsRequest = Type.Object(
  {
    vms: Type.Optional(Type.Array(WorkloadName, { maxItems: 1000, uniqueItems: true })),
    databases: Type.Optional(Type.Array(WorkloadName, { maxItems: 1000, uniqueItems: true })),
    gpus: Type.Optional(Keyed(Type.String({ pattern: '^[a-z0-9][a-z0-9.-]{0,62}$' }), Type.Integer({ minimum: 0, maximum: 10_000 }))),
  },
  { additionalProperties: false },
);
export type WorkloadsRequest = Static<typeof WorkloadsRequest>;

export const WorkloadsResult = Type.Object({
  customer_id: Type.String(),
  vms: Type.Array(Type.String()),
  databases: Type.Array(Type.String()),
  gpus: Type.Record(Type.String(), Type.Integer()),
  running: Type.Boolean(),
});

export const RequiredActionsRequest = Type.Object(
  { actions: Type.Array(Type.String({ pattern: '^[A-Za-z][A-Za-z0-9_]{0,63}$' }), { maxItems: 20, uniqueItems: true }) },
  { additionalProperties: false },
);

export const ClockAdvanceRequest = Type.Object(
  {
    seconds: Type.Integer({
      minimum: 1,
      maximum: 10 * 366 * 24 * 3600,
      description: `How far to move the test clock: at most 10 × 366 days in one call, and never past ${TEST_CLOCK_MAX_OFFSET_SECONDS} seconds (36,525 days, 100 years) ahead of real time (400 VALIDATION_ERROR on \`seconds\`, with \`max_offset_seconds\`, \`offset_seconds\` and \`max_seconds\` in details; \`POST /test-helpers/clock/reset\` puts the clock back).`,
    }),
  },
  { additionalProperties: false },
);
export const ClockResult = Type.Object({
  now: Type.String({ format: 'date-time', description: "The partner's test clock after the move." }),
  offset_seconds: Type.Integer({ description: 'How far the test clock runs ahead of real time.' }),
});
