import { type Static, Type } from 'typebox';
import type { OperationsTable } from './tables.ts';

/** What an operation's `error.code` can be (platform/failures.ts): fixed codes, and UPSTREAM_<status>. */
export const FAILURE_CODES = [
  'PROVISIONING_FAILED',
  'PROVISIONING_TIMEOUT',
  'NO_ADDRESS_SPACE',
  'CUSTOMER_DELETING',
  'CUSTOMER_DELETED',
  'UPSTREAM_NOT_FOUND',
  'UPSTREAM_400',
  'UPSTREAM_401',
  'UPSTREAM_403',
  'UPSTREAM_409',
  'UPSTREAM_422',
  'UPSTREAM_<status>',
] as const;
const FAILURE_CODE_PATTERN =
  '^(PROVISIONING_FAILED|PROVISIONING_TIMEOUT|NO_ADDRESS_SPACE|CUSTOMER_DELETING|CUSTOMER_DELETED|UPSTREAM_NOT_FOUND|UPSTREAM_[1-5][0-9]{2})$';

const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const OperationError = Type.Object(
  {
    code: Type.String({
      description:
        'PROVISIONING_FAILED, PROVISIONING_TIMEOUT, NO_ADDRESS_SPACE, CUSTOMER_DELETING, CUSTOMER_DELETED, UPSTREAM_NOT_FOUND or UPSTREAM_<status> (the platform refused a step with that HTTP status: on the kubernetes platform a 4xx of the cluster or the identity provider, for example UPSTREAM_403 or UPSTREAM_422; a 409, 429 or 5xx is retried, not reported).',
      pattern: FAILURE_CODE_PATTERN,
      // The codes the platform drivers produce (docs/platform-kubernetes.md, "Failure codes").
      'x-failure-codes': [...FAILURE_CODES],
    }),
    message: Type.String(),
  },
  { title: 'OperationError' },
);

/** CONTRACT §4, Operations. */
export const Operation = Type.Object(
  {
    id: Type.String({ description: 'op_...' }),
    type: Type.Union([
      Type.Literal('customer.create'),
      Type.Literal('customer.delete'),
      Type.Literal('project.create'),
      Type.Literal('project.delete'),
    ]),
    status: Type.Union([Type.Literal('pending'), Type.Literal('running'), Type.Literal('succeeded'), Type.Literal('failed')], {
      title: 'OperationStatus',
    }),
    customer_id: Type.String(),
    project: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
    finished_at: NullableTimestamp,
    error: Type.Union([OperationError, Type.Null()]),
  },
  { title: 'Operation' },
);
export type Operation = Static<typeof Operation>;

type OperationRow = Pick<
  OperationsTable,
  'id' | 'type' | 'status' | 'customer_id' | 'project' | 'created_at' | 'updated_at' | 'finished_at' | 'error_code' | 'error_message'
>;

export function toOperation(row: OperationRow): Operation {
  return {
    id: row.id,
    type: row.type,
    status: row.status,
    customer_id: row.customer_id,
    project: row.project,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    finished_at: row.finished_at ? row.finished_at.toISOString() : null,
    error: row.error_code ? { code: row.error_code, message: row.error_message ?? '' } : null,
  };
}
