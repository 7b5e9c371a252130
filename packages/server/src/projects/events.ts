import { Type } from 'typebox';
import { OperationError } from '../operations/schemas.ts';
import { Project } from './schemas.ts';

/**
 * The outcome of a create operation: its project (null once gone), the state it left, and the error of
 * a failure. A customer's creation reports its first project's the same way (`customers/events.ts`).
 */
export const CreateOutcome = {
  customer_id: Type.String(),
  operation_id: Type.String(),
  project: Type.Union([Project, Type.Null()]),
  error: Type.Union([OperationError, Type.Null()], { description: 'Set when the operation failed.' }),
};

const ProjectCreated = Type.Object({ ...CreateOutcome, state: Project.properties.state });

/** partner-api.md, Event kinds: the `data` of the events a project's changes record. */
export const PROJECT_EVENTS = {
  'project.ready': ProjectCreated,
  'project.failed': ProjectCreated,
  'project.deleted': Type.Object({ customer_id: Type.String(), project: Type.String({ description: 'The project name.' }) }),
};

type ProjectEventSchemas = typeof PROJECT_EVENTS;

declare module '../events/payloads.ts' {
  interface EventSchemas extends ProjectEventSchemas {}
}
