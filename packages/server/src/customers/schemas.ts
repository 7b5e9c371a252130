import { type Static, Type } from 'typebox';
import { PageQuery } from '../infra/pagination/cursor.ts';
import { Text } from '../infra/request-schemas.ts';
import { Operation } from '../operations/schemas.ts';
import { CustomerId, DNS_LABEL, Email, PlanId, Username } from '../platform/names.ts';
import { Project } from '../projects/schemas.ts';
import type { CustomersTable } from './tables.ts';

const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const CustomerStatus = Type.Union(
  [
    Type.Literal('provisioning'),
    Type.Literal('active'),
    Type.Literal('failed'),
    Type.Literal('suspended'),
    Type.Literal('deletion_scheduled'),
    Type.Literal('deleting'),
  ],
  { title: 'CustomerStatus' },
);

/** CONTRACT §4, Customers: the list item; `GET /customers/{id}` adds `projects`. */
export const Customer = Type.Object(
  {
    id: Type.String(),
    external_id: Type.Union([Type.String(), Type.Null()]),
    display_name: Type.Union([Type.String(), Type.Null()]),
    status: CustomerStatus,
    plan_id: Type.String(),
    owner: Type.Object({ username: Type.String(), email: Type.String() }),
    created_at: Timestamp,
    updated_at: Timestamp,
    suspended_at: NullableTimestamp,
    suspension_reason: Type.Union([Type.String(), Type.Null()]),
    scheduled_deletion_at: NullableTimestamp,
  },
  { title: 'Customer' },
);
export type Customer = Static<typeof Customer>;

/** The columns of its own a customer's answer shows (its plan id is capacity's): what a list selects. */
export const CUSTOMER_COLUMNS = [
  'id',
  'external_id',
  'display_name',
  'status',
  'owner_username',
  'owner_email',
  'created_at',
  'updated_at',
  'suspended_at',
  'suspension_reason',
  'scheduled_deletion_at',
] as const satisfies readonly (keyof CustomersTable)[];

export function toCustomer(row: Pick<CustomersTable, (typeof CUSTOMER_COLUMNS)[number]> & { plan_id: string }): Customer {
  return {
    id: row.id,
    external_id: row.external_id,
    display_name: row.display_name,
    status: row.status,
    plan_id: row.plan_id,
    owner: { username: row.owner_username, email: row.owner_email },
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    suspended_at: row.suspended_at ? row.suspended_at.toISOString() : null,
    suspension_reason: row.suspension_reason,
    scheduled_deletion_at: row.scheduled_deletion_at ? row.scheduled_deletion_at.toISOString() : null,
  };
}

export const CustomerWithProjects = Type.Object(
  { ...Customer.properties, projects: Type.Array(Project) },
  { title: 'CustomerWithProjects' },
);
export type CustomerWithProjects = Static<typeof CustomerWithProjects>;

export const CreateCustomerRequest = Type.Object(
  {
    id: CustomerId,
    external_id: Type.Optional(Text({ minLength: 1, maxLength: 255 })),
    display_name: Type.Optional(Text({ minLength: 1, maxLength: 200 })),
    owner: Type.Object(
      {
        username: Username,
        email: Email,
        first_name: Type.Optional(Text({ minLength: 1, maxLength: 100 })),
        last_name: Type.Optional(Text({ minLength: 1, maxLength: 100 })),
      },
      { additionalProperties: false },
    ),
    plan_id: Type.Optional(PlanId),
    project: Type.Optional(
      Type.String({
        pattern: DNS_LABEL,
        description: "The first project's name; default: the partner's default project (`defaults.project` in whoami, normally `default`).",
      }),
    ),
  },
  { title: 'CreateCustomerRequest', additionalProperties: false },
);
export type CreateCustomerRequest = Static<typeof CreateCustomerRequest>;

export const CreateCustomerResponse = Type.Object({ customer: Customer, operation: Operation }, { title: 'CreateCustomerResult' });

export const ListCustomersQuery = Type.Object(
  {
    external_id: Type.Optional(Text({ minLength: 1, maxLength: 255 })),
    status: Type.Optional(CustomerStatus),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const SuspendRequest = Type.Object(
  { reason: Type.Optional(Text({ maxLength: 500 })) },
  { title: 'SuspendRequest', additionalProperties: false },
);
export const SuspendResult = Type.Object(
  {
    customer_id: Type.String(),
    status: Type.Literal('suspended'),
    suspended_at: Timestamp,
    workloads_running: Type.Integer({ description: 'VMs and databases still running (0 once suspended).' }),
  },
  { title: 'SuspendResult' },
);
export const ResumeRequest = Type.Object({}, { additionalProperties: false });
export const ResumeResult = Type.Object(
  {
    customer_id: Type.String(),
    status: Type.Literal('active'),
    workloads_running: Type.Integer(),
    cancelled_scheduled_deletion: Type.Boolean(),
  },
  { title: 'ResumeResult' },
);

export const DeleteCustomerQuery = Type.Object(
  {
    mode: Type.Optional(Type.Union([Type.Literal('scheduled'), Type.Literal('immediate')], { default: 'scheduled' })),
    grace_days: Type.Optional(Type.Integer({ minimum: 0, maximum: 365 })),
  },
  { additionalProperties: false },
);
export const DeleteCustomerResult = Type.Object(
  {
    customer_id: Type.String(),
    status: CustomerStatus,
    scheduled_deletion_at: NullableTimestamp,
    grace_days: Type.Union([Type.Integer(), Type.Null()]),
    recoverable: Type.Boolean(),
    operation_id: Type.Union([Type.String(), Type.Null()], { description: 'The customer.delete operation once teardown has started.' }),
  },
  { title: 'DeleteCustomerResult' },
);
export type DeleteCustomerResult = Static<typeof DeleteCustomerResult>;
