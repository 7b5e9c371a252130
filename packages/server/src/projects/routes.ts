import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { requestTenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { listOf, ok, success } from '../infra/http/envelope.ts';
import { PageQuery } from '../infra/pagination/cursor.ts';
import { Operation } from '../operations/schemas.ts';
import { CustomerParams, ProjectName, ProjectParams } from '../platform/names.ts';
import { Project } from './schemas.ts';
import type { ProjectService } from './service.ts';

const ProjectWithOperation = Type.Object({ project: Project, operation: Operation });

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  options: { clock: Clock };
  projects: ProjectService;
}

/** CONTRACT §4, Projects. */
export const projectRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { projects, options } = services;
  const tenant = (request: Parameters<typeof requestTenant>[0]) => requestTenant(request, options.clock);

  app.post(
    '/customers/:id/projects',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'createProject',
        tags: ['Projects'],
        summary: 'Create a project (asynchronous)',
        description:
          'Starts a `project.create` operation and answers 202 with the project (`provisioning`) and the operation; `project.ready` or `project.failed` follows. The namespace is `<organization>-<name>` and must fit in 63 characters. The customer must be active: 409 NOT_READY while it provisions, CONFLICT while it is suspended or being deleted.',
        params: CustomerParams,
        body: Type.Object({ name: ProjectName }, { additionalProperties: false }),
        response: { 202: success(ProjectWithOperation, 'Accepted: the project, provisioning, and the operation that provisions it.') },
      },
    },
    async (request, reply) => reply.code(202).send(ok(await projects.create(tenant(request), request.params.id, request.body.name))),
  );

  app.get(
    '/customers/:id/projects',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'listProjects',
        tags: ['Projects'],
        summary: "List a customer's projects by name",
        description: "A customer's projects, by name.",
        params: CustomerParams,
        querystring: Type.Object(PageQuery, { additionalProperties: false }),
        response: { 200: listOf(Project, 'A page of projects.') },
      },
    },
    async (request) => ({
      status: 'success' as const,
      ...(await projects.list(tenant(request), request.params.id, { limit: request.query.limit ?? 50, cursor: request.query.cursor })),
    }),
  );

  app.get(
    '/customers/:id/projects/:project',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'getProject',
        tags: ['Projects'],
        summary: 'Read a project',
        description: 'One project of a customer, with its state and namespace.',
        params: ProjectParams,
        response: { 200: success(Project, 'The project.') },
      },
    },
    async (request) => ok(await projects.get(tenant(request), request.params.id, request.params.project)),
  );

  app.delete(
    '/customers/:id/projects/:project',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'deleteProject',
        tags: ['Projects'],
        summary: 'Delete a project (asynchronous; it disappears once finalized)',
        description:
          "Starts the project's deletion and answers 202. The project disappears once finalized (then 404 NOT_FOUND), and `project.deleted` follows.",
        params: ProjectParams,
        response: { 202: success(ProjectWithOperation, 'Accepted: the project, being deleted, and the operation that deletes it.') },
      },
    },
    async (request, reply) => reply.code(202).send(ok(await projects.delete(tenant(request), request.params.id, request.params.project))),
  );
};
