import { type Static, Type } from 'typebox';
import type { ProjectsTable } from './tables.ts';

export const ProjectState = Type.Union(
  [Type.Literal('provisioning'), Type.Literal('ready'), Type.Literal('failed'), Type.Literal('deleting')],
  {
    title: 'ProjectState',
  },
);

/** CONTRACT §4, Projects. */
export const Project = Type.Object(
  {
    name: Type.String(),
    state: ProjectState,
    namespace: Type.String({ description: '`<customer id>-<project name>`.' }),
    cidr: Type.Union([Type.String(), Type.Null()], { description: 'The workload address range, once allocated.' }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { title: 'Project' },
);
export type Project = Static<typeof Project>;

export function toProject(row: Pick<ProjectsTable, 'name' | 'state' | 'namespace' | 'cidr' | 'created_at' | 'updated_at'>): Project {
  return {
    name: row.name,
    state: row.state,
    namespace: row.namespace,
    cidr: row.cidr,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
