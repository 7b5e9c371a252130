import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { requestTenant, type Tenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import { listOf, ok, success } from '../infra/http/envelope.ts';
import { PageQuery } from '../infra/pagination/cursor.ts';
import { CustomerParams, UserParams } from '../platform/names.ts';
import { ConsoleLoginResult, CreateUserRequest, DeleteUserResult, User } from './schemas.ts';
import type { UserService } from './service.ts';

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  /** The console module mints a user's login link (it depends on users, so users names only what it calls). */
  console: { mintLogin(tenant: Tenant, customerId: string, username: string): Promise<{ url: string; expires_at: string }> };
  options: { clock: Clock };
  users: UserService;
}

/** CONTRACT §4, Users and Console login. */
export const userRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { users, console: consoleService, options } = services;
  const tenant = (request: Parameters<typeof requestTenant>[0]) => requestTenant(request, options.clock);

  app.post(
    '/customers/:id/users',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'createUser',
        tags: ['Users'],
        summary: 'Create a user of a customer',
        description:
          "Adds a user to an active customer's identity realm. `role` defaults to `member`. The email is unique within the customer (409 ALREADY_EXISTS); the usernames `admin` and `service-account-*` are reserved (400).",
        params: CustomerParams,
        body: CreateUserRequest,
        response: { 201: success(User, 'The user, created.') },
      },
    },
    async (request, reply) => reply.code(201).send(ok(await users.create(tenant(request), request.params.id, request.body))),
  );

  app.get(
    '/customers/:id/users',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'listUsers',
        tags: ['Users'],
        summary: "List a customer's users by username, owner included (the first 1,000)",
        description: "A customer's users by username, the owner included; the first 1,000 are listable.",
        params: CustomerParams,
        querystring: Type.Object(PageQuery, { additionalProperties: false }),
        response: { 200: listOf(User, 'A page of users.') },
      },
    },
    async (request) => ({
      status: 'success' as const,
      ...(await users.list(tenant(request), request.params.id, { limit: request.query.limit ?? 50, cursor: request.query.cursor })),
    }),
  );

  app.get(
    '/customers/:id/users/:username',
    {
      config: { scope: 'customers:read' },
      schema: {
        operationId: 'getUser',
        tags: ['Users'],
        summary: 'Read a user',
        description: 'One user of a customer.',
        params: UserParams,
        response: { 200: success(User, 'The user.') },
      },
    },
    async (request) => ok(await users.get(tenant(request), request.params.id, request.params.username)),
  );

  app.delete(
    '/customers/:id/users/:username',
    {
      config: { scope: 'customers:write' },
      schema: {
        operationId: 'deleteUser',
        tags: ['Users'],
        summary: 'Delete a user (not the owner)',
        description: "Removes a user from the customer's realm. The owner cannot be deleted (403 FORBIDDEN).",
        params: UserParams,
        response: { 200: success(DeleteUserResult, 'The user, deleted.') },
      },
    },
    async (request) => ok(await users.delete(tenant(request), request.params.id, request.params.username)),
  );

  app.post(
    '/customers/:id/users/:username/console-login',
    {
      config: { scope: 'customers:sso' },
      schema: {
        operationId: 'createConsoleLogin',
        tags: ['Users'],
        summary: 'Mint a one-time console login URL for a user (valid 5 minutes)',
        description:
          "A URL that logs the user into the customer's console once, within 5 minutes (`expires_at`): impersonation, so it needs `customers:sso`. A user with pending identity-provider actions answers 409 USER_ACTION_REQUIRED, the message naming the action.",
        params: UserParams,
        response: { 201: success(ConsoleLoginResult, 'The one-time login URL.') },
      },
    },
    async (request, reply) => {
      const login = await consoleService.mintLogin(tenant(request), request.params.id, request.params.username);
      return reply.code(201).header('cache-control', 'no-store').send(ok(login));
    },
  );
};
