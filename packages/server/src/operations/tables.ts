import type { Generated, Selectable } from 'kysely';
import type { KeyMode } from '../infra/mode.ts';

export type OperationType = 'customer.create' | 'customer.delete' | 'project.create' | 'project.delete';

export type OperationStatus = 'pending' | 'running' | 'succeeded' | 'failed';

export interface OperationsTable {
  id: string;
  partner_id: string;
  mode: KeyMode;
  type: OperationType;
  status: OperationStatus;
  customer_uid: string;
  customer_id: string;
  project: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  error_code: string | null;
  error_message: string | null;
  /** When the engine should look at it next (the partner's mode clock). */
  due_at: Date;
  /**
   * The claim working on it until `lease_until` (server clock): the process's engine name and the
   * claim's number; a killed process's lease runs out.
   */
  lease_owner: string | null;
  lease_until: Date | null;
  /** Looks in a row that the platform could not answer (or that failed unexpectedly); 0 after a look that moved. */
  failed_looks: Generated<number>;
  /** Why the last look did not move, for the operator (never shown to partners). */
  last_problem: string | null;
  /** The W3C `traceparent` of the request that opened it, when traces are on: each look's span links to it. */
  trace_parent: string | null;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface OperationTables {
  operations: OperationsTable;
}

/** A row of `operations` as a query answers it. */
export type OperationRow = Selectable<OperationsTable>;
