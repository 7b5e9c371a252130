import { type Static, Type } from 'typebox';
import type { OperationsTable } from './tables.ts';

const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const OperationError = Type.Object(
  {
    code: Type.String({
      description: 'PROVISIONING_FAILED, PROVISIONING_TIMEOUT, NO_ADDRESS_SPACE, CUSTOMER_DELETING, CUSTOMER_DELETED or UPSTREAM_<status>.',
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
